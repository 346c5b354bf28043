/** Money in the catalogue's currency, to the cent (hourly prices to a tenth of a cent). */
export function money(amount: number, currency = "USD", digits = 2): string {
  return new Intl.NumberFormat(undefined, {
    style: "currency",
    currency,
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  }).format(amount);
}

export function bytes(n: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

/** An instant in the user's time zone. */
export function localTime(iso: string): string {
  return new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

/** The same instant in UTC (the title of every shown time). */
export function utcTime(iso: string): string {
  return `${new Date(iso).toISOString().replace("T", " ").slice(0, 19)} UTC`;
}

/** `<input type="datetime-local">` value (local wall time, to the second) of an instant. */
export function toLocalInput(iso: string): string {
  const d = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/**
 * The instant to restore to from the picker's value (local wall time, to the second) within the
 * window [earliest, latest]: a second that holds the window's first or last instant means that
 * instant (the picker cannot name a fraction of a second); anything further out is sent as picked,
 * for the API to refuse with its reason.
 */
export function restoreInstant(picked: string, earliest: string, latest: string): string {
  const at = new Date(picked).getTime();
  const first = Date.parse(earliest);
  const last = Date.parse(latest);
  const second = (ms: number) => Math.floor(ms / 1000);
  // The picker shows `latest` cut to its second: sending that would drop what the window's last second holds.
  if (second(at) === second(last) || (at > last && at - last < 1000)) return latest;
  if (second(at) === second(first) || (at < first && first - at < 1000)) return earliest;
  return new Date(at).toISOString();
}
