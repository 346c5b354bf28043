/** A column of a table: its header and how to read it from a row. */
export type Column<T> = [header: string, read: (row: T) => unknown];
/** Rows as aligned columns, headers in capitals (as doctl and neonctl print them). */
export declare function table<T>(rows: readonly T[], columns: Column<T>[]): string;
/** One record as `key: value` lines, nested objects flattened with dots. */
export declare function record(obj: object): string;
/**
 * Progress of a wait on stderr: a spinner redrawn in place on a terminal,
 * otherwise one plain line per change (logs and CI keep every step).
 */
export declare function progress(stream: NodeJS.WriteStream): {
    update(next: string): void;
    done(final: string): void;
    fail(): void;
};
