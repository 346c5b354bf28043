/**
 * Reads a line from the terminal without echoing it (a password). Only on a
 * terminal: a script passes --password or DBAAS_PASSWORD instead.
 */
export declare function promptHidden(question: string, stdin: NodeJS.ReadStream, stderr: NodeJS.WriteStream): Promise<string>;
/** A visible one-line answer from the terminal (an e-mail address). */
export declare function promptLine(question: string, stdin: NodeJS.ReadStream, stderr: NodeJS.WriteStream): Promise<string>;
