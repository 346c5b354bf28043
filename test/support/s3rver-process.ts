/**
 * s3rver in its own process, for tests: `node --openssl-legacy-provider
 * --import tsx test/support/s3rver-process.ts <directory> <bucket>`. Prints
 * `listening <port>` once ready. The legacy provider is for s3rver's
 * ListObjectsV2 continuation tokens (DES), which OpenSSL 3 no longer offers
 * by default: without it any listing past 1,000 keys fails.
 */
import S3rver from "s3rver";

const [directory, bucket] = process.argv.slice(2);
if (!directory || !bucket) throw new Error("usage: s3rver-process.ts <directory> <bucket>");

const server = new S3rver({ address: "127.0.0.1", port: 0, silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
const { port } = await server.run();
process.stdout.write(`listening ${port}\n`);
const stop = () => void server.close().then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
