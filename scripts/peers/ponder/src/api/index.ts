// `ponder start` requires an API file exporting a Hono app. The benchmark reads the table
// directly from PostgreSQL, so no GraphQL/SQL routes are added; Ponder still serves its own
// /health, /ready, /status and /metrics.
import { Hono } from "hono";

const app = new Hono();

export default app;
