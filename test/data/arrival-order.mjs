// A client in a process of its own (the test's process also runs the server, so its own requests
// would wait with the server's event loop): sends the long request, then a health check once the
// long one had its head start, and prints in which order their answers were complete.
const [base, token, longPath, headStartMs] = process.argv.slice(2);
const order = [];
const long = fetch(`${base}${longPath}`, { headers: { authorization: `Bearer ${token}` } }).then(async (response) => {
  const text = await response.text();
  order.push('long');
  return { status: response.status, lines: text.trimEnd().split('\n').length, body: text.length < 100_000 ? text : null };
});
await new Promise((resolve) => setTimeout(resolve, Number(headStartMs)));
const health = await fetch(`${base}/healthz`);
await health.text();
order.push('healthz');
const answer = await long;
process.stdout.write(JSON.stringify({ order, healthStatus: health.status, long: answer }));
