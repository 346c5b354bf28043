import { type Group } from "../command.ts";
export declare const members: Group;
export declare const apiKeys: Group;
