// Shared by the TestNodeSDK scripts: loads the official SDKs from the
// node_modules directory in BUZZGATE_NODE_SDKS (installed by `make tools`),
// reads the gateway's base URL and API key from argv and prints the results
// as one JSON line; any error exits 1 with its message on stderr.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';

const dir = process.env.BUZZGATE_NODE_SDKS;
if (!dir) {
  console.error('BUZZGATE_NODE_SDKS is not set: run `make tools`');
  process.exit(2);
}
// A require rooted in that node_modules directory (the SDKs ship CommonJS).
export const sdk = createRequire(join(dir, 'resolve-from-here.js'));

export const [base, apiKey] = process.argv.slice(2);
if (!base || !apiKey) {
  console.error('usage: node script.mjs <base-url> <api-key>');
  process.exit(2);
}

export const newKey = () => 'node-' + randomUUID();

// run prints what body returns as one JSON line.
export async function run(body) {
  try {
    console.log(JSON.stringify(await body()));
  } catch (err) {
    console.error(err && err.stack ? err.stack : String(err));
    process.exit(1);
  }
}

// caught runs f, which must throw, and describes the error: its class,
// whether it is an instance of cls, its HTTP status and error body.
export async function caught(f, cls) {
  try {
    await f();
  } catch (err) {
    return { class: err.constructor.name, instance: err instanceof cls, status: err.status ?? null, body: err.error ?? null };
  }
  throw new Error('no error was raised');
}
