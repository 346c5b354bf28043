// Container health probe: GET /healthz on this container's own port, exit 0 on 200.
// The Connect services speak HTTP/2 cleartext without HTTP/1 upgrade, so curl-style
// HTTP/1 probes get no answer from them; only the gateway is HTTP/1.
import http from "node:http";
import http2 from "node:http2";

const DEFAULT_PORTS = { gateway: 8080, identity: 8081, databases: 8082, billing: 8083, "provisioner-agent": 8090 };
const service = process.env.DBAAS_SERVICE ?? "";
const port = Number(process.env.PORT || DEFAULT_PORTS[service]);
const TIMEOUT_MS = 4000;

function done(ok, why) {
  if (!ok) console.error(`healthcheck ${service}:${port}: ${why}`);
  process.exit(ok ? 0 : 1);
}

if (!Number.isInteger(port) || port <= 0) done(false, "no port (set PORT or DBAAS_SERVICE)");
setTimeout(() => done(false, `no answer within ${TIMEOUT_MS} ms`), TIMEOUT_MS).unref();

if (service === "gateway") {
  http
    .get({ host: "127.0.0.1", port, path: "/healthz" }, (res) => {
      res.resume();
      done(res.statusCode === 200, `status ${res.statusCode}`);
    })
    .on("error", (err) => done(false, err.message));
} else {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on("error", (err) => done(false, err.message));
  const req = session.request({ ":path": "/healthz" });
  req.on("response", (headers) => {
    req.resume();
    done(headers[":status"] === 200, `status ${headers[":status"]}`);
  });
  req.on("error", (err) => done(false, err.message));
  req.end();
}
