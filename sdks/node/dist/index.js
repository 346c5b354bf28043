export { DbaasClient } from "./client.js";
export { DbaasConnectionError, DbaasError, DbaasWaitError } from "./errors.js";
export { OPERATIONS, PAGED } from "./operations.js";
export { PageIterator } from "./pages.js";
export { DEFAULT_BASE_URL } from "./transport.js";
