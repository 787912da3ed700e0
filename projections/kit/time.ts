/** Statistics time slices, UTC (the Unix epoch starts on a UTC midnight, so flooring is enough). */
export const RESOLUTIONS = [
  { code: 'S', seconds: 300 }, // Mailjet's "Highest": 5 minutes
  { code: 'H', seconds: 3600 },
  { code: 'D', seconds: 86_400 },
] as const;

export function sliceStart(time: number, seconds: number): number {
  return Math.floor(time / seconds) * seconds;
}
