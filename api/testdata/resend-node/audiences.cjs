// Drives Posthaste's legacy audiences with Resend's official Node SDK,
// unchanged: contacts.* with `audienceId` (which the SDK sends to
// /audiences/{id}/contacts), and /audiences itself through the SDK's own
// request methods, with the paths and bodies that Resend's older SDKs and
// its Python SDK send (6.x's `audiences` is `segments`). RESEND_BASE_URL is
// Posthaste, RESEND_API_KEY team A's key, OTHER_API_KEY team B's. Prints
// "ok" or throws.
'use strict';
const assert = require('node:assert/strict');
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const other = new Resend(process.env.OTHER_API_KEY);

  // audiences.create/list/get/remove as Resend's older SDKs send them.
  const aud = must('audiences.create', await resend.post('/audiences', { name: 'Registered users' }));
  assert.equal(aud.object, 'audience');
  assert.equal(aud.name, 'Registered users');
  assert.ok(aud.id);
  const gotAud = must('audiences.get', await resend.get(`/audiences/${aud.id}`));
  assert.deepEqual([gotAud.object, gotAud.id, gotAud.name], ['audience', aud.id, 'Registered users']);
  assert.ok(gotAud.created_at);
  // 6.x's audiences is segments: the same rows.
  const seg = must('audiences.create (6.x)', await resend.audiences.create({ name: 'Beta' }));
  const auds = must('audiences.list', await resend.get('/audiences'));
  assert.equal(auds.object, 'list');
  assert.deepEqual(auds.data.map((a) => a.name).sort(), ['Beta', 'Registered users']);
  assert.equal(must('audiences.get (6.x)', await resend.audiences.get(aud.id)).name, 'Registered users');

  // contacts.* with audienceId.
  const ct = must('contacts.create with audienceId', await resend.contacts.create({ audienceId: aud.id, email: 'Grace@Example.com', firstName: 'Grace',
    lastName: 'Hopper' }));
  assert.equal(ct.object, 'contact');
  assert.ok(ct.id);
  const byEmail = must('contacts.get by email with audienceId',
    await resend.contacts.get({ audienceId: aud.id, email: 'grace@example.com' }));
  assert.deepEqual([byEmail.id, byEmail.first_name, byEmail.last_name], [ct.id, 'Grace', 'Hopper']);
  assert.equal(must('contacts.get by id', await resend.contacts.get({ audienceId: aud.id, id: ct.id })).email,
    'grace@example.com');
  must('contacts.update by email with audienceId',
    await resend.contacts.update({ audienceId: aud.id, email: 'grace@example.com', unsubscribed: true }));
  must('contacts.update by id with audienceId',
    await resend.contacts.update({ audienceId: aud.id, id: ct.id, firstName: 'Amazing Grace' }));
  const listed = must('contacts.list with audienceId', await resend.contacts.list({ audienceId: aud.id }));
  assert.equal(listed.data.length, 1);
  assert.deepEqual([listed.data[0].first_name, listed.data[0].unsubscribed], ['Amazing Grace', true]);
  assert.equal(must('GET /audiences/{id}/contacts', await resend.get(`/audiences/${aud.id}/contacts`)).data.length, 1);
  // A contact created under an audience is in that segment, and in no other.
  assert.equal(must('contacts.list by segment', await resend.contacts.list({ segmentId: aud.id })).data.length, 1);
  assert.equal(must('contacts.list other audience', await resend.contacts.list({ audienceId: seg.id })).data.length, 0);
  const notIn = await resend.contacts.get({ audienceId: seg.id, id: ct.id });
  assert.equal(notIn.error?.statusCode, 404, 'a contact outside the audience');
  // The same address under a second audience joins it (one contact per team).
  const again = must('contacts.create in a second audience',
    await resend.contacts.create({ audienceId: seg.id, email: 'grace@example.com' }));
  assert.equal(again.id, ct.id);
  const dup = await resend.contacts.create({ audienceId: seg.id, email: 'grace@example.com' });
  assert.equal(dup.error?.statusCode, 409);
  const bad = await resend.contacts.create({ audienceId: aud.id, email: 'not an address' });
  assert.equal(bad.error?.statusCode, 422);

  // Another team sees none of it.
  for (const res of [
    await other.get(`/audiences/${aud.id}`),
    await other.delete(`/audiences/${aud.id}`),
    await other.contacts.create({ audienceId: aud.id, email: 'eve@example.com' }),
    await other.contacts.list({ audienceId: aud.id }),
    await other.get(`/audiences/${aud.id}/contacts`),
    await other.contacts.get({ audienceId: aud.id, id: ct.id }),
    await other.contacts.update({ audienceId: aud.id, id: ct.id, firstName: 'Eve' }),
    await other.contacts.remove({ audienceId: aud.id, email: 'grace@example.com' }),
  ]) {
    assert.equal(res.error?.statusCode, 404, JSON.stringify(res.error));
  }
  assert.equal(must('other audiences.list', await other.get('/audiences')).data.length, 0);

  must('contacts.create 2', await resend.contacts.create({ audienceId: aud.id, email: 'ada@example.com' }));
  assert.equal(must('contacts.remove by email with audienceId',
    await resend.contacts.remove({ audienceId: aud.id, email: 'ada@example.com' })).deleted, true);
  const removed = must('contacts.remove with audienceId', await resend.contacts.remove({ audienceId: aud.id, id: ct.id }));
  assert.equal(removed.deleted, true);
  assert.equal((await resend.contacts.get({ id: ct.id })).error?.statusCode, 404);
  const del = must('audiences.remove', await resend.delete(`/audiences/${aud.id}`));
  assert.deepEqual([del.object, del.id, del.deleted], ['audience', aud.id, true]);
  assert.equal((await resend.get(`/audiences/${aud.id}`)).error?.statusCode, 404);
  must('audiences.remove (6.x)', await resend.audiences.remove(seg.id));
  console.log('ok');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
