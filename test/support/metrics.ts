/**
 * The value of one sample in a Prometheus exposition: `name` with its labels as they are written
 * (`mailtally_webhook_urls{status="alive"}`), or undefined when the text has no such line.
 */
export function metricValue(text: string, name: string): string | undefined {
  return new RegExp(`^${name.replace(/[{}+.]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1];
}
