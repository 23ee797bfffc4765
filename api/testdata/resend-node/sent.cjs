// Drives the attachments and the sharing of sent emails with Resend's
// official Node SDK, unchanged: emails.send with attachments,
// emails.attachments.list/get and emails.share. RESEND_BASE_URL and
// RESEND_API_KEY as in contacts.cjs. Prints "ok" or throws.
'use strict';
const assert = require('node:assert/strict');
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const sent = must('emails.send', await resend.emails.send({
    from: 'Acme <onboarding@posthaste.test>',
    to: ['delivered@posthaste.test'],
    subject: 'Receipt',
    html: '<p>Thanks <img src="cid:logo"></p>',
    attachments: [
      { filename: 'invoice.pdf', content: Buffer.from('%PDF-1.4 node\n') },
      { filename: 'logo.png', content: Buffer.from('PNG').toString('base64'), contentId: 'logo' },
    ],
  }));
  const emailId = sent.id;

  const list = must('emails.attachments.list', await resend.emails.attachments.list({ emailId }));
  assert.equal(list.object, 'list');
  assert.equal(list.has_more, false);
  assert.equal(list.data.length, 2);
  assert.equal(list.data[0].filename, 'invoice.pdf');
  assert.equal(list.data[0].content_type, 'application/pdf');
  assert.equal(list.data[0].content_disposition, 'attachment');
  assert.equal(list.data[0].size, 14);
  assert.equal(list.data[1].content_disposition, 'inline');
  assert.equal(list.data[1].content_id, 'logo');
  assert.ok(Date.parse(list.data[0].expires_at) > Date.now());

  const page = must('emails.attachments.list limit', await resend.emails.attachments.list({ emailId, limit: 1 }));
  assert.equal(page.has_more, true);
  assert.equal(page.data.length, 1);

  const att = must('emails.attachments.get', await resend.emails.attachments.get({ emailId, id: list.data[0].id }));
  assert.equal(att.object, 'attachment');
  assert.equal(att.id, list.data[0].id);
  const res = await fetch(att.download_url);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), '%PDF-1.4 node\n');

  const shared = must('emails.share', await resend.emails.share(emailId, { expiresIn: '2 hours' }));
  assert.equal(shared.object, 'email');
  assert.equal(shared.id, emailId);
  const view = await fetch(shared.url);
  assert.equal(view.status, 200);
  assert.match(await view.text(), /Receipt/);
  must('emails.share without options', await resend.emails.share(emailId));

  const bad = await resend.emails.share(emailId, { expiresIn: '3 days' });
  assert.equal(bad.error?.name, 'validation_error');
  const missing = await resend.emails.attachments.get({ emailId, id: '00000000-0000-4000-8000-000000000000' });
  assert.equal(missing.error?.name, 'not_found');
  console.log('ok');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
