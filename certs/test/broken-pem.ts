/**
 * A PEM block whose body is not a key or certificate at all, for tests of what happens when one does
 * not parse. Built from its type so no file here contains what looks like a committed private key.
 */
export function brokenPem(type: string): string {
  return `-----BEGIN ${type}-----\nAAAA\n-----END ${type}-----\n`;
}
