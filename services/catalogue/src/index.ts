export * from "./catalogue.ts";
export * from "./scopes.ts";
export * from "./vocabulary.ts";
export * from "./standing.ts";
