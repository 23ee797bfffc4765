// Drives Posthaste's contact imports with Resend's official Node SDK,
// unchanged: the SDK reads RESEND_BASE_URL; RESEND_API_KEY is the key.
// Nothing applies the import here (no worker), so it stays queued.
// Prints "ok" or throws.
'use strict';
const assert = require('node:assert/strict');
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  must('contactProperties.create', await resend.contactProperties.create({ key: 'plan', type: 'string' }));
  const segment = must('segments.create', await resend.segments.create({ name: 'Imported' }));
  const topic = must('topics.create', await resend.topics.create({ name: 'News', defaultSubscription: 'opt_out' }));

  const csv = 'Email,First Name,Plan\nann@example.com,Ann,pro\nbob@example.com,Bob,free\n';
  const created = must('contacts.imports.create', await resend.contacts.imports.create({
    file: new Blob([csv], { type: 'text/csv' }),
    columnMap: { email: 'Email', firstName: 'First Name', properties: { plan: { column: 'Plan', type: 'string' } } },
    onConflict: 'upsert',
    segments: [{ id: segment.id }],
    topics: [{ id: topic.id, subscription: 'opt_in' }],
  }));
  assert.equal(created.object, 'contact_import');
  assert.ok(created.id);

  const got = must('contacts.imports.get', await resend.contacts.imports.get(created.id));
  assert.equal(got.object, 'contact_import');
  assert.equal(got.id, created.id);
  assert.equal(got.status, 'queued');
  assert.equal(got.counts.total, 2);

  const list = must('contacts.imports.list', await resend.contacts.imports.list({ limit: 10 }));
  assert.equal(list.object, 'list');
  assert.equal(list.data.length, 1);
  const none = must('contacts.imports.list status', await resend.contacts.imports.list({ status: 'completed' }));
  assert.equal(none.data.length, 0);

  const bad = await resend.contacts.imports.create({ file: new Blob(['mail\nx\n'], { type: 'text/csv' }) });
  assert.equal(bad.error.statusCode, 422);
  console.log('ok');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
