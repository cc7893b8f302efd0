// Validates an OpenAPI document read from stdin with a real validator
// (@seriousme/openapi-schema-validator, the official OpenAPI JSON schemas),
// for ../../gwnode_test.go. Prints {"valid", "version", "errors"}.
import { Validator } from '@seriousme/openapi-schema-validator';

let text = '';
for await (const chunk of process.stdin) text += chunk;
const validator = new Validator();
const res = await validator.validate(JSON.parse(text));
process.stdout.write(JSON.stringify({ valid: res.valid, version: validator.version ?? null, errors: res.errors ?? null }) + '\n');
