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

function must(res, what) {
  if (res.error) throw new Error(`${what}: ${JSON.stringify(res.error)}`);
  return res.data;
}

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const other = new Resend(process.env.OTHER_API_KEY);

  // audiences.create/list/get/remove as Resend's older SDKs send them.
  const aud = must(await resend.post('/audiences', { name: 'Registered users' }), 'audiences.create');
  assert.equal(aud.object, 'audience');
  assert.equal(aud.name, 'Registered users');
  assert.ok(aud.id);
  const gotAud = must(await resend.get(`/audiences/${aud.id}`), 'audiences.get');
  assert.deepEqual([gotAud.object, gotAud.id, gotAud.name], ['audience', aud.id, 'Registered users']);
  assert.ok(gotAud.created_at);
  // 6.x's audiences is segments: the same rows.
  const seg = must(await resend.audiences.create({ name: 'Beta' }), 'audiences.create (6.x)');
  const auds = must(await resend.get('/audiences'), 'audiences.list');
  assert.equal(auds.object, 'list');
  assert.deepEqual(auds.data.map((a) => a.name).sort(), ['Beta', 'Registered users']);
  assert.equal(must(await resend.audiences.get(aud.id), 'audiences.get (6.x)').name, 'Registered users');

  // contacts.* with audienceId.
  const ct = must(await resend.contacts.create({ audienceId: aud.id, email: 'Grace@Example.com', firstName: 'Grace',
    lastName: 'Hopper' }), 'contacts.create with audienceId');
  assert.equal(ct.object, 'contact');
  assert.ok(ct.id);
  const byEmail = must(await resend.contacts.get({ audienceId: aud.id, email: 'grace@example.com' }),
    'contacts.get by email with audienceId');
  assert.deepEqual([byEmail.id, byEmail.first_name, byEmail.last_name], [ct.id, 'Grace', 'Hopper']);
  assert.equal(must(await resend.contacts.get({ audienceId: aud.id, id: ct.id }), 'contacts.get by id').email,
    'grace@example.com');
  must(await resend.contacts.update({ audienceId: aud.id, email: 'grace@example.com', unsubscribed: true }),
    'contacts.update by email with audienceId');
  must(await resend.contacts.update({ audienceId: aud.id, id: ct.id, firstName: 'Amazing Grace' }),
    'contacts.update by id with audienceId');
  const listed = must(await resend.contacts.list({ audienceId: aud.id }), 'contacts.list with audienceId');
  assert.equal(listed.data.length, 1);
  assert.deepEqual([listed.data[0].first_name, listed.data[0].unsubscribed], ['Amazing Grace', true]);
  assert.equal(must(await resend.get(`/audiences/${aud.id}/contacts`), 'GET /audiences/{id}/contacts').data.length, 1);
  // A contact created under an audience is in that segment, and in no other.
  assert.equal(must(await resend.contacts.list({ segmentId: aud.id }), 'contacts.list by segment').data.length, 1);
  assert.equal(must(await resend.contacts.list({ audienceId: seg.id }), 'contacts.list other audience').data.length, 0);
  const notIn = await resend.contacts.get({ audienceId: seg.id, id: ct.id });
  assert.equal(notIn.error?.statusCode, 404, 'a contact outside the audience');
  // The same address under a second audience joins it (one contact per team).
  const again = must(await resend.contacts.create({ audienceId: seg.id, email: 'grace@example.com' }),
    'contacts.create in a second audience');
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
  assert.equal(must(await other.get('/audiences'), 'other audiences.list').data.length, 0);

  must(await resend.contacts.create({ audienceId: aud.id, email: 'ada@example.com' }), 'contacts.create 2');
  assert.equal(must(await resend.contacts.remove({ audienceId: aud.id, email: 'ada@example.com' }),
    'contacts.remove by email with audienceId').deleted, true);
  const removed = must(await resend.contacts.remove({ audienceId: aud.id, id: ct.id }), 'contacts.remove with audienceId');
  assert.equal(removed.deleted, true);
  assert.equal((await resend.contacts.get({ id: ct.id })).error?.statusCode, 404);
  const del = must(await resend.delete(`/audiences/${aud.id}`), 'audiences.remove');
  assert.deepEqual([del.object, del.id, del.deleted], ['audience', aud.id, true]);
  assert.equal((await resend.get(`/audiences/${aud.id}`)).error?.statusCode, 404);
  must(await resend.audiences.remove(seg.id), 'audiences.remove (6.x)');
  console.log('ok');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
