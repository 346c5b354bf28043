/** What `dbaas auth signup|login` remembers. */
export interface CliConfig {
    url?: string;
    token?: string;
    /** When the login token stops working (login tokens last an hour). */
    expires_at?: string;
    email?: string;
}
/** `$XDG_CONFIG_HOME/dbaas/config.json`, else `$HOME/.config/dbaas/config.json`. */
export declare function configPath(env: NodeJS.ProcessEnv): string;
export declare function readConfig(path: string): Promise<CliConfig>;
/** Written whole (temporary file, then rename) and readable by its owner only: it holds a credential. */
export declare function writeConfig(path: string, config: CliConfig): Promise<void>;
export declare function removeConfigToken(path: string): Promise<boolean>;
