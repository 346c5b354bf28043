import { type Group } from "../command.ts";
export declare const replicas: Group;
