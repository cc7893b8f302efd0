// The walk-through of issue 23, with a client generated from the key
// service's own OpenAPI document: openapi-typescript turns
// /api/openapi.json into api.d.ts (next to this file, at test time), tsc
// checks this file against it (a request or a field the document does not
// describe fails to compile), and openapi-fetch sends the requests.
//
// Usage: node walkthrough.js <base URL> <admin access token> <service>
// Prints one JSON object with what each step saw.
import createClient from "openapi-fetch";
import type { paths } from "./api.js";

// Node's globals, declared here rather than through @types/node.
declare const process: { argv: string[]; stdout: { write(s: string): void } };

const [baseUrl, adminToken, service] = process.argv.slice(2);

function must<T>(step: string, r: { data?: T; error?: unknown; response: Response }): T {
  if (r.data === undefined) {
    throw new Error(`${step}: ${r.response.status} ${JSON.stringify(r.error)}`);
  }
  return r.data;
}

const admin = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${adminToken}` } });

// 1. An admin creates a user.
const email = `walk-${Date.now()}@example.com`;
const user = must("create user", await admin.POST("/api/users", {
  body: { email, password: "walkthrough-password", licenseActive: true, plan: "standard" },
}));

// 2. ... and an access token for them (write scope).
const created = must("create token", await admin.POST("/api/tokens", {
  body: { name: "ci", scopes: ["write"], userId: user.id },
}));

// 3. With the user's token only: create a key.
const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${created.token}` } });
const me = must("me", await client.GET("/api/auth/me"));
const key = must("create key", await client.POST("/api/keys", { body: { name: "walk-through key" } }));

// 4. Validate it (API-key routes: a client without the token).
const anon = createClient<paths>({ baseUrl });
const valid = must("validate", await anon.POST("/api/keys/validate", {
  headers: { "X-API-Key": key.key },
}));

// 5. Call the proxy with it.
const proxied = await anon.GET("/api/proxy/{service}/v1/{rest}", {
  params: { path: { service, rest: "hello" } },
  headers: { "X-API-Key": key.key },
  parseAs: "text",
});

// 6. Read its usage.
const usage = must("usage", await client.GET("/api/keys/{id}/usage", {
  params: { path: { id: key.id }, query: { days: 1 } },
}));

// 7. Rotate it, 8. revoke it.
const rotated = must("rotate", await client.POST("/api/keys/{id}/rotate", { params: { path: { id: key.id } } }));
const revoked = must("revoke", await client.POST("/api/keys/{id}/revoke", { params: { path: { id: key.id } } }));
const after = await anon.POST("/api/keys/validate", { headers: { "X-API-Key": rotated.key } });

const tokens = must("list tokens", await client.GET("/api/tokens"));

process.stdout.write(JSON.stringify({
  userEmail: user.email,
  tokenPrefix: created.token.slice(0, 8),
  tokenScopes: created.scopes,
  meId: me.user.id,
  userId: user.id,
  keyPrefix: key.key.slice(0, 9),
  valid: valid.valid,
  validUser: valid.userId,
  proxyStatus: proxied.response.status,
  proxyBody: proxied.data,
  proxyLimit: proxied.response.headers.get("X-RateLimit-Limit"),
  usageTotal: usage.totalUsageCount,
  usageUsed: usage.rateLimit.used,
  rotatedPrefix: rotated.key.slice(0, 9),
  graceHours: rotated.gracePeriodHours,
  revoked: revoked.success,
  afterStatus: after.response.status,
  afterError: after.error,
  tokens: tokens.tokens.map((t) => t.name),
}) + "\n");
