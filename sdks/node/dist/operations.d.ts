import type { OperationId } from "./types.ts";
/**
 * The method that performs each operation of the API, by `operationId`. The
 * type makes tsc fail when the document gains an operation this client lacks;
 * test/sdks/contract.test.ts checks the same against the served document for
 * the three clients.
 */
export declare const OPERATIONS: Record<OperationId, (...args: never[]) => unknown>;
