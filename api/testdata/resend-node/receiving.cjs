// Drives receiving (domain capabilities, received emails and their
// attachments) with Resend's official Node SDK, unchanged. RESEND_BASE_URL
// and RESEND_API_KEY as in contacts.cjs; DOMAIN_ID is a verified domain of
// the key's team, DOMAIN_NAME its name, EMAIL_ID an email it received with
// an attachment invoice.pdf. Prints "ok" or throws.
'use strict';
const assert = require('node:assert/strict');
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const domainId = process.env.DOMAIN_ID;
  const emailId = process.env.EMAIL_ID;

  const created = must('domains.create with capabilities', await resend.domains.create({ name: 'new.' + process.env.DOMAIN_NAME,
    capabilities: { receiving: 'enabled' } }));
  assert.deepEqual(created.capabilities, { sending: 'enabled', receiving: 'enabled' });
  assert.ok(created.records.some((r) => r.record === 'Receiving' && r.type === 'MX' && r.priority === 10));

  must('domains.update', await resend.domains.update({ id: domainId, capabilities: { receiving: 'enabled' } }));
  const domain = must('domains.get', await resend.domains.get(domainId));
  assert.equal(domain.capabilities.receiving, 'enabled');
  const mx = domain.records.find((r) => r.record === 'Receiving');
  assert.ok(mx, 'a Receiving record');
  assert.equal(mx.type, 'MX');

  const list = must('emails.receiving.list', await resend.emails.receiving.list({ limit: 10 }));
  assert.equal(list.object, 'list');
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].id, emailId);

  const email = must('emails.receiving.get', await resend.emails.receiving.get(emailId));
  assert.equal(email.object, 'email');
  assert.deepEqual(email.received_for, ['support@' + process.env.DOMAIN_NAME]);
  assert.equal(email.attachments[0].filename, 'invoice.pdf');
  const raw = await fetch(email.raw.download_url);
  assert.equal(raw.status, 200);
  assert.match(await raw.text(), /raw body/);
  const cid = must('emails.receiving.get cid', await resend.emails.receiving.get(emailId, { html_format: 'cid' }));
  assert.match(cid.html, /cid:logo1/);

  const atts = must('attachments.list', await resend.emails.receiving.attachments.list({ emailId }));
  assert.equal(atts.data.length, 2);
  const att = must('attachments.get', await resend.emails.receiving.attachments.get({ emailId, id: atts.data[0].id }));
  assert.equal(att.object, 'attachment');
  assert.equal(att.filename, 'invoice.pdf');
  const res = await fetch(att.download_url);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), '%PDF-1.4\n');

  // forward is the SDK's own: it downloads the raw message from
  // raw.download_url and sends it on with POST /emails.
  const fwd = must('emails.receiving.forward', await resend.emails.receiving.forward({ emailId, to: 'delivered@posthaste.test',
    from: 'Acme <onboarding@posthaste.test>' }));
  assert.ok(fwd.id);
  const sent = must('emails.get forwarded', await resend.emails.get(fwd.id));
  assert.equal(sent.subject, 'Hi');
  assert.match(sent.text, /raw body/);
  const wrapped = must('forward wrapped', await resend.emails.receiving.forward({ emailId, to: 'delivered@posthaste.test',
    from: 'Acme <onboarding@posthaste.test>', passthrough: false, text: 'See below.' }));
  assert.equal(must('emails.get wrapped', await resend.emails.get(wrapped.id)).subject, 'Fwd: Hi');

  const missing = await resend.emails.receiving.get('00000000-0000-7000-8000-000000000000');
  assert.equal(missing.error.name, 'not_found');
  console.log('ok');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
