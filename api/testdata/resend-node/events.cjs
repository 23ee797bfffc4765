// Drives Posthaste's custom events with Resend's official Node SDK (6.x),
// unchanged: resend.events.create, get (by id and by name), list, update,
// send (by email, which makes the address a contact, and by contactId)
// and remove, and the SDK errors of refused calls. Run by
// TestResendNodeSDKEvents (api/automations_test.go) with RESEND_BASE_URL
// and RESEND_API_KEY set; prints one JSON line of results or exits
// non-zero with the SDK error.
'use strict';
const { Resend } = require('resend');

const { must, refused } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);

  const created = must('events.create', await resend.events.create({
    name: 'user.signed_up',
    schema: { plan: 'string', seats: 'number', trial: 'boolean', started: 'date' },
  }));
  must('events.create bare', await resend.events.create({ name: 'user.logged_in' }));
  const byName = must('events.get name', await resend.events.get('user.signed_up'));
  const byId = must('events.get id', await resend.events.get(created.id));
  const bare = must('events.get bare', await resend.events.get('user.logged_in'));
  const list = must('events.list', await resend.events.list({ limit: 10 }));

  const badPayload = refused('events.send bad payload', await resend.events.send({
    event: 'user.signed_up', email: 'new@example.com', payload: { seats: 'many' },
  }));
  const sent = must('events.send email', await resend.events.send({
    event: 'user.signed_up',
    email: 'new@example.com',
    payload: { plan: 'pro', seats: 3, trial: true, started: '2026-01-02' },
  }));
  const contact = must('contacts.get', await resend.contacts.get({ email: 'new@example.com' }));
  const sentById = must('events.send contactId', await resend.events.send({
    event: 'user.logged_in', contactId: sent.contact_id,
  }));

  const updated = must('events.update', await resend.events.update('user.signed_up', { schema: { plan: 'string' } }));
  const afterUpdate = must('events.get after update', await resend.events.get(created.id));
  must('events.update null', await resend.events.update(created.id, { schema: null }));
  const cleared = must('events.get cleared', await resend.events.get('user.signed_up'));

  const reserved = refused('events.create reserved', await resend.events.create({ name: 'resend:email.sent' }));
  const duplicate = refused('events.create duplicate', await resend.events.create({ name: 'user.signed_up' }));
  const both = refused('events.send both', await resend.events.send({
    event: 'user.signed_up', email: 'new@example.com', contactId: sent.contact_id,
  }));

  const removed = must('events.remove', await resend.events.remove(created.id));
  const gone = refused('events.get removed', await resend.events.get('user.signed_up'));

  console.log(JSON.stringify({
    created, byName, byId, bare, list, updated, afterUpdate, cleared, sent, sentById, contact,
    badPayload, reserved, both, duplicate, removed, gone,
  }));
})().catch((e) => { console.error(e); process.exit(1); });
