const RFC3339 = /^(\d{4}-\d\d-\d\d)[Tt ](\d\d:\d\d:\d\d)(?:\.(\d+))?([Zz]|[+-]\d\d:\d\d)$/;

/** An RFC 3339 timestamp in milliseconds since the epoch (fractions to the millisecond, as the server sends them); undefined if it is not one. */
export function parseTime(value: string): number | undefined {
  const parts = RFC3339.exec(value);
  if (!parts) return undefined;
  const [, date, clock, fraction, zone] = parts;
  const millis = (fraction ?? "").slice(0, 3).padEnd(3, "0");
  const ms = Date.parse(`${date}T${clock}.${millis}${zone === "z" ? "Z" : zone}`);
  return Number.isNaN(ms) ? undefined : ms;
}
