/**
 * Loaded (`node --import`) into every process the local stack's runner
 * starts. The runner gives each child one end of a socket pair as fd 3
 * (DBAAS_RUNNER_FD) and keeps the other; the kernel closes the runner's end
 * when the runner dies, however it dies — kill -9 included. End-of-file on
 * fd 3 therefore means "the runner is gone", and the child stops as if the
 * runner had sent SIGTERM (an agent stops its PostgreSQL instances, the
 * metadata keeper its server) instead of living on as an orphan.
 */
import net from "node:net";

const fd = Number(process.env.DBAAS_RUNNER_FD);
if (Number.isInteger(fd) && fd > 2) {
  // Not for grandchildren: a Node process this child spawns has no such descriptor.
  delete process.env.DBAAS_RUNNER_FD;
  // Once the runner is gone nobody reads our output: a log line written while stopping must not crash the stop.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
  const runner = new net.Socket({ fd, readable: true, writable: false });
  runner.on("error", () => {});
  runner.on("close", () => process.kill(process.pid, "SIGTERM"));
  runner.resume();
  // Watching must not keep a finished process alive.
  runner.unref();
}
