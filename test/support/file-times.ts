/**
 * A vitest reporter for CI (.ci/run): every test file's time, then the ten slowest, printed when the run ends
 * and before the default reporter's summary ("Test Files … Tests …"), which stays the last thing CI prints.
 * A file's time is what it held a worker for: environment, harness, imports and setup files, tests and hooks.
 */
import { relative } from "node:path";
import type { Reporter, TestModule, Vitest } from "vitest/node";

const SLOWEST = 10;

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1).padStart(7)} s`;
}

export interface FileTime {
  file: string;
  ms: number;
  state: string;
}

export function fileTimes(modules: ReadonlyArray<TestModule>, root: string): FileTime[] {
  return modules.map((m) => {
    const d = m.diagnostic();
    const ms = d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration;
    return { file: relative(root, m.moduleId), ms, state: m.state() };
  });
}

export function report(times: FileTime[]): string {
  if (times.length === 0) return "";
  const line = (t: FileTime) => `${seconds(t.ms)}  ${t.file}${t.state === "passed" ? "" : `  (${t.state})`}`;
  const byFile = [...times].sort((a, b) => a.file.localeCompare(b.file));
  const slowest = [...times].sort((a, b) => b.ms - a.ms).slice(0, SLOWEST);
  const total = times.reduce((sum, t) => sum + t.ms, 0);
  return [
    "",
    `Time per test file (${times.length} files, ${seconds(total).trim()} in all, across the workers):`,
    ...byFile.map(line),
    "",
    `The ${slowest.length} slowest:`,
    ...slowest.map(line),
    "",
  ].join("\n");
}

export default class FileTimes implements Reporter {
  private root = process.cwd();

  onInit(vitest: Vitest): void {
    this.root = vitest.config.root;
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const text = report(fileTimes(modules, this.root));
    if (text !== "") process.stdout.write(`${text}\n`);
  }
}
