// Drives receiving (domain capabilities, received emails and their
// attachments) with Resend's official Node SDK, unchanged. RESEND_BASE_URL
// and RESEND_API_KEY as in contacts.cjs; DOMAIN_ID is a verified domain of
// the key's team, DOMAIN_NAME its name, EMAIL_ID an email it received with
// an attachment invoice.pdf. Prints "ok" or throws.
'use strict';
const assert = require('node:assert/strict');
const { Resend } = require('resend');

function must(res, what) {
  if (res.error) throw new Error(`${what}: ${JSON.stringify(res.error)}`);
  return res.data;
}

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const domainId = process.env.DOMAIN_ID;
  const emailId = process.env.EMAIL_ID;

  const created = must(await resend.domains.create({ name: 'new.' + process.env.DOMAIN_NAME,
    capabilities: { receiving: 'enabled' } }), 'domains.create with capabilities');
  assert.deepEqual(created.capabilities, { sending: 'enabled', receiving: 'enabled' });
  assert.ok(created.records.some((r) => r.record === 'Receiving' && r.type === 'MX' && r.priority === 10));

  must(await resend.domains.update({ id: domainId, capabilities: { receiving: 'enabled' } }), 'domains.update');
  const domain = must(await resend.domains.get(domainId), 'domains.get');
  assert.equal(domain.capabilities.receiving, 'enabled');
  const mx = domain.records.find((r) => r.record === 'Receiving');
  assert.ok(mx, 'a Receiving record');
  assert.equal(mx.type, 'MX');

  const list = must(await resend.emails.receiving.list({ limit: 10 }), 'emails.receiving.list');
  assert.equal(list.object, 'list');
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].id, emailId);

  const email = must(await resend.emails.receiving.get(emailId), 'emails.receiving.get');
  assert.equal(email.object, 'email');
  assert.deepEqual(email.received_for, ['support@' + process.env.DOMAIN_NAME]);
  assert.equal(email.attachments[0].filename, 'invoice.pdf');
  const raw = await fetch(email.raw.download_url);
  assert.equal(raw.status, 200);
  assert.match(await raw.text(), /raw body/);
  const cid = must(await resend.emails.receiving.get(emailId, { html_format: 'cid' }), 'emails.receiving.get cid');
  assert.match(cid.html, /cid:logo1/);

  const atts = must(await resend.emails.receiving.attachments.list({ emailId }), 'attachments.list');
  assert.equal(atts.data.length, 2);
  const att = must(await resend.emails.receiving.attachments.get({ emailId, id: atts.data[0].id }), 'attachments.get');
  assert.equal(att.object, 'attachment');
  assert.equal(att.filename, 'invoice.pdf');
  const res = await fetch(att.download_url);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), '%PDF-1.4\n');

  // forward is the SDK's own: it downloads the raw message from
  // raw.download_url and sends it on with POST /emails.
  const fwd = must(await resend.emails.receiving.forward({ emailId, to: 'delivered@posthaste.test',
    from: 'Acme <onboarding@posthaste.test>' }), 'emails.receiving.forward');
  assert.ok(fwd.id);
  const sent = must(await resend.emails.get(fwd.id), 'emails.get forwarded');
  assert.equal(sent.subject, 'Hi');
  assert.match(sent.text, /raw body/);
  const wrapped = must(await resend.emails.receiving.forward({ emailId, to: 'delivered@posthaste.test',
    from: 'Acme <onboarding@posthaste.test>', passthrough: false, text: 'See below.' }), 'forward wrapped');
  assert.equal(must(await resend.emails.get(wrapped.id), 'emails.get wrapped').subject, 'Fwd: Hi');

  const missing = await resend.emails.receiving.get('00000000-0000-7000-8000-000000000000');
  assert.equal(missing.error.name, 'not_found');
  console.log('ok');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
