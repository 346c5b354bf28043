import { UsageError } from "./command.ts";

/**
 * Reads a line from the terminal without echoing it (a password). Only on a
 * terminal: a script passes --password or DBAAS_PASSWORD instead.
 */
export function promptHidden(question: string, stdin: NodeJS.ReadStream, stderr: NodeJS.WriteStream): Promise<string> {
  if (!stdin.isTTY) throw new UsageError("no terminal to ask for the password: pass --password or set DBAAS_PASSWORD");
  return new Promise((resolve, reject) => {
    let answer = "";
    stderr.write(question);
    stdin.setRawMode(true);
    stdin.resume();
    stdin.setEncoding("utf8");
    const finish = (err?: Error) => {
      stdin.setRawMode(false);
      stdin.pause();
      stdin.off("data", onData);
      stderr.write("\n");
      if (err) reject(err);
      else resolve(answer);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === "\r" || ch === "\n") return finish();
        if (ch === "\u0003") return finish(new UsageError("cancelled"));
        if (ch === "\u007f" || ch === "\b") answer = answer.slice(0, -1);
        else if (ch >= " ") answer += ch;
      }
    };
    stdin.on("data", onData);
  });
}

/** A visible one-line answer from the terminal (an e-mail address). */
export function promptLine(question: string, stdin: NodeJS.ReadStream, stderr: NodeJS.WriteStream): Promise<string> {
  if (!stdin.isTTY) throw new UsageError("no terminal to ask: pass the option instead");
  return new Promise((resolve) => {
    stderr.write(question);
    stdin.resume();
    stdin.setEncoding("utf8");
    let answer = "";
    const onData = (chunk: string) => {
      answer += chunk;
      const nl = answer.search(/[\r\n]/);
      if (nl < 0) return;
      stdin.off("data", onData);
      stdin.pause();
      resolve(answer.slice(0, nl).trim());
    };
    stdin.on("data", onData);
  });
}
