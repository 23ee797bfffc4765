// Drives the suppression list and the webhook event log with Resend's
// official Node SDK, unchanged: the SDK reads RESEND_BASE_URL;
// RESEND_API_KEY is the key, WEBHOOK_ID an endpoint of the key's team
// subscribed to suppression.added and suppression.removed, TEST_EVENT_ID
// a test event sent to it (one attempt, answered 204). Prints "ok" or
// throws.
'use strict';
const assert = require('node:assert/strict');
const { Resend } = require('resend');

// must unwraps the SDK's {data, error} result.
const { must } = require('./must.cjs');

const isTime = (s) => typeof s === 'string' && !Number.isNaN(Date.parse(s));

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const webhookId = process.env.WEBHOOK_ID;

  const added = must('suppressions.add', await resend.suppressions.add({ email: 'Ann@Example.com' }));
  assert.equal(added.object, 'suppression');
  assert.ok(added.id);

  for (const ref of ['ann@example.com', added.id]) {
    const got = must(`suppressions.get ${ref}`, await resend.suppressions.get(ref));
    assert.equal(got.object, 'suppression');
    assert.equal(got.id, added.id);
    assert.equal(got.email, 'ann@example.com');
    assert.equal(got.origin, 'manual');
    assert.equal(got.source_id, null);
    assert.ok(isTime(got.created_at));
  }

  const batch = must('suppressions.batch.add', await resend.suppressions.batch.add({ emails: ['bob@example.com', 'Cy@example.com',
    'ann@example.com'] }));
  assert.equal(batch.data.length, 3);
  for (const d of batch.data) {
    assert.equal(d.object, 'suppression');
    assert.ok(d.id);
  }
  assert.equal(batch.data[2].id, added.id, 'an address listed already keeps its entry');

  const listed = must('suppressions.list origin', await resend.suppressions.list({ origin: 'manual' }));
  assert.equal(listed.object, 'list');
  assert.equal(listed.has_more, false);
  assert.deepEqual(listed.data.map((s) => s.email).sort(), ['ann@example.com', 'bob@example.com', 'cy@example.com']);
  for (const s of listed.data) {
    assert.equal(s.origin, 'manual');
    assert.equal(s.source_id, null);
  }
  assert.equal(must('suppressions.list bounce', await resend.suppressions.list({ origin: 'bounce' })).data.length, 0);
  const bad = await resend.suppressions.list({ origin: 'spam' });
  assert.equal(bad.error?.statusCode, 422);

  const tooMany = await resend.suppressions.batch.add({ emails: Array.from({ length: 101 }, (_, i) => `u${i}@example.com`) });
  assert.equal(tooMany.error?.statusCode, 422);
  assert.equal(tooMany.error?.name, 'validation_error');

  const byIds = must('suppressions.batch.remove ids', await resend.suppressions.batch.remove({ ids: [batch.data[0].id] }));
  assert.deepEqual(byIds.data.map(({ object, id, deleted }) => ({ object, id, deleted })),
    [{ object: 'suppression', id: batch.data[0].id, deleted: true }]);
  const byEmails = must('suppressions.batch.remove emails',
    await resend.suppressions.batch.remove({ emails: ['cy@example.com'] }));
  assert.equal(byEmails.data[0].id, batch.data[1].id);
  assert.equal(byEmails.data[0].deleted, true);

  const removed = must('suppressions.remove', await resend.suppressions.remove('ann@example.com'));
  assert.equal(removed.object, 'suppression');
  assert.equal(removed.id, added.id);
  assert.equal(removed.deleted, true);
  const gone = await resend.suppressions.get('ann@example.com');
  assert.equal(gone.error?.statusCode, 404);
  assert.equal(gone.error?.name, 'not_found');
  assert.equal(must('suppressions.list', await resend.suppressions.list()).data.length, 0);

  // The events of these changes are in the endpoint's log (newest first),
  // after the test event.
  const events = must('webhooks.events.list', await resend.webhooks.events.list({ webhookId }));
  const types = events.data.map((e) => e.type).reverse();
  assert.deepEqual(types, ['suppression.added', 'suppression.added', 'suppression.added', 'suppression.added',
    'suppression.removed', 'suppression.removed', 'suppression.removed']);
  const last = events.data.find((e) => e.type === 'suppression.removed');
  const event = must('webhooks.events.get', await resend.webhooks.events.get({ webhookId, eventId: last.id }));
  assert.equal(event.payload.type, 'suppression.removed');
  assert.deepEqual(Object.keys(event.payload.data).sort(), ['created_at', 'email', 'id', 'origin', 'source_id']);
  assert.equal(event.payload.data.email, 'ann@example.com');
  assert.equal(event.payload.data.origin, 'manual');

  // Attempts in Resend's shape.
  const attempts = must('webhooks.events.attempts.list',
    await resend.webhooks.events.attempts.list({ webhookId, eventId: process.env.TEST_EVENT_ID }));
  assert.equal(attempts.object, 'list');
  assert.equal(attempts.data.length, 1);
  const a = attempts.data[0];
  assert.ok(a.id);
  assert.equal(a.http_status_code, 204);
  assert.equal(typeof a.response, 'string');
  assert.ok(isTime(a.sent_at));

  console.log('ok');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
