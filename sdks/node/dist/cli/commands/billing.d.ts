import { type Group } from "../command.ts";
export declare const billing: Group;
