/** The command line is wrong (exit code 2, the usage text printed after the message). */
export class UsageError extends Error {}
