import { writeFile } from "node:fs/promises";
import type { Schemas } from "../../types.ts";
import { type Group, need, optional, outcome, print, UsageError } from "../command.ts";

export const billing: Group = {
  summary: "Usage, invoices, payment methods and spending alerts",
  commands: {
    usage: {
      summary: "Month-to-date usage and its price",
      usage: "",
      examples: ["dbaas billing usage", "dbaas billing usage -o json"],
      async run(ctx) {
        print(ctx, await ctx.client.billing.getUsage());
      },
    },
    invoices: {
      summary: "List invoices, newest period first",
      usage: "",
      examples: ["dbaas billing invoices"],
      async run(ctx) {
        print(ctx, await ctx.client.billing.listInvoices().all(), [
          ["id", (i) => i.id],
          ["period", (i) => i.period],
          ["amount", (i) => i.amount.toFixed(2)],
          ["currency", (i) => i.currency],
          ["status", (i) => i.status],
          ["issued", (i) => i.issued_at],
        ]);
      },
    },
    "invoice-pdf": {
      summary: "Save an invoice as a PDF file",
      usage: "<invoice-id> [--out FILE]",
      args: ["invoice-id"],
      options: { out: { type: "string", value: "FILE", description: "Where to write it (default: <invoice-id>.pdf)" } },
      examples: ["dbaas billing invoice-pdf inv-abc123 --out march.pdf"],
      async run(ctx, args) {
        const id = args.positionals[0]!;
        const file = optional(args, "out") ?? `${id}.pdf`;
        const pdf = await ctx.client.billing.getInvoicePdf(id);
        await writeFile(file, pdf);
        outcome(ctx, { id, file, bytes: pdf.byteLength }, `Wrote ${file}.`);
      },
    },
    "payment-methods": {
      summary: "List payment methods",
      usage: "",
      examples: ["dbaas billing payment-methods"],
      async run(ctx) {
        print(ctx, await ctx.client.billing.listPaymentMethods().all(), [
          ["id", (m) => m.id],
          ["brand", (m) => m.brand],
          ["last4", (m) => m.last4],
          ["expires", (m) => `${m.exp_month}/${m.exp_year}`],
          ["default", (m) => (m.default ? "yes" : "")],
        ]);
      },
    },
    "add-payment-method": {
      summary: "Add a card from a payment processor token (the first becomes the default)",
      usage: "--token TOKEN",
      options: { token: { type: "string", value: "TOKEN", description: "Token from the payment processor's client-side SDK" } },
      examples: ["dbaas billing add-payment-method --token tok_visa"],
      async run(ctx, args) {
        print(ctx, await ctx.client.billing.addPaymentMethod({ type: "card", token: need(args, "token") }));
      },
    },
    "set-default-payment-method": {
      summary: "Make a payment method the one invoices are charged to",
      usage: "<payment-method-id>",
      args: ["payment-method-id"],
      examples: ["dbaas billing set-default-payment-method pm-abc123"],
      async run(ctx, args) {
        print(ctx, await ctx.client.billing.updatePaymentMethod(args.positionals[0]!, { default: true }));
      },
    },
    "remove-payment-method": {
      summary: "Remove a payment method",
      usage: "<payment-method-id>",
      args: ["payment-method-id"],
      examples: ["dbaas billing remove-payment-method pm-abc123"],
      async run(ctx, args) {
        await ctx.client.billing.deletePaymentMethod(args.positionals[0]!);
        outcome(ctx, { id: args.positionals[0], removed: true }, `Removed ${args.positionals[0]}.`);
      },
    },
    alerts: {
      summary: "List spending alerts",
      usage: "",
      examples: ["dbaas billing alerts"],
      async run(ctx) {
        print(ctx, await ctx.client.billing.listAlerts().all(), [
          ["id", (a) => a.id],
          ["threshold", (a) => a.threshold],
          ["currency", (a) => a.currency],
          ["channels", (a) => a.channels.join(",")],
        ]);
      },
    },
    "create-alert": {
      summary: "Be told when the month-to-date total reaches a threshold",
      usage: "--threshold AMOUNT [--currency USD]",
      options: {
        threshold: { type: "string", value: "AMOUNT", description: "Month-to-date total that fires the alert" },
        currency: { type: "string", value: "CODE", description: "The catalogue's currency (default USD)" },
      },
      examples: ["dbaas billing create-alert --threshold 50"],
      async run(ctx, args) {
        const channels: Schemas["Alert"]["channels"] = ["email"];
        const threshold = Number(need(args, "threshold"));
        if (!Number.isFinite(threshold)) throw new UsageError("--threshold must be a number, e.g. 50 or 12.5");
        print(ctx, await ctx.client.billing.createAlert({ threshold, currency: optional(args, "currency") ?? "USD", channels }));
      },
    },
    "delete-alert": {
      summary: "Remove a spending alert",
      usage: "<alert-id>",
      args: ["alert-id"],
      examples: ["dbaas billing delete-alert alert-abc123"],
      async run(ctx, args) {
        await ctx.client.billing.deleteAlert(args.positionals[0]!);
        outcome(ctx, { id: args.positionals[0], deleted: true }, `Removed ${args.positionals[0]}.`);
      },
    },
  },
};
