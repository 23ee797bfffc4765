// Drives Posthaste with Resend's official Node SDK, unchanged: the SDK
// reads RESEND_BASE_URL; RESEND_API_KEY is the key. Prints "ok" or throws.
'use strict';
const assert = require('node:assert/strict');
const { Resend } = require('resend');

// must unwraps the SDK's {data, error} result.
function must(res, what) {
  if (res.error) throw new Error(`${what}: ${JSON.stringify(res.error)}`);
  return res.data;
}

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);

  const prop = must(await resend.contactProperties.create({ key: 'plan', type: 'string', fallbackValue: 'free' }),
    'contactProperties.create');
  assert.ok(prop.id);
  must(await resend.contactProperties.create({ key: 'seats', type: 'number' }), 'contactProperties.create number');
  const gotProp = must(await resend.contactProperties.get(prop.id), 'contactProperties.get');
  assert.equal(gotProp.key, 'plan');
  must(await resend.contactProperties.update({ id: prop.id, fallbackValue: 'trial' }), 'contactProperties.update');
  const props = must(await resend.contactProperties.list(), 'contactProperties.list');
  assert.equal(props.data.length, 2);

  const segment = must(await resend.segments.create({ name: 'Early adopters' }), 'segments.create');
  assert.ok(segment.id);
  assert.equal(must(await resend.segments.get(segment.id), 'segments.get').name, 'Early adopters');
  assert.equal(must(await resend.segments.list(), 'segments.list').data.length, 1);

  const topic = must(await resend.topics.create({ name: 'Releases', defaultSubscription: 'opt_in',
    description: 'New versions' }), 'topics.create');
  assert.ok(topic.id);
  must(await resend.topics.update({ id: topic.id, name: 'Release notes' }), 'topics.update');
  assert.equal(must(await resend.topics.get(topic.id), 'topics.get').name, 'Release notes');
  assert.equal(must(await resend.topics.list(), 'topics.list').data.length, 1);

  const contact = must(await resend.contacts.create({ email: 'Ada@Example.com', firstName: 'Ada',
    lastName: 'Lovelace', properties: { plan: 'pro', seats: 5 }, segments: [{ id: segment.id }],
    topics: [{ id: topic.id, subscription: 'opt_out' }] }), 'contacts.create');
  assert.ok(contact.id);

  const got = must(await resend.contacts.get({ email: 'ada@example.com' }), 'contacts.get');
  assert.equal(got.id, contact.id);
  assert.equal(got.first_name, 'Ada');
  assert.deepEqual(got.properties, { plan: 'pro', seats: 5 });

  must(await resend.contacts.update({ id: contact.id, unsubscribed: true, properties: { seats: 6 } }), 'contacts.update');
  const listed = must(await resend.contacts.list({ segmentId: segment.id }), 'contacts.list by segment');
  assert.equal(listed.data.length, 1);
  assert.equal(listed.data[0].unsubscribed, true);

  const topics = must(await resend.contacts.topics.list({ id: contact.id }), 'contacts.topics.list');
  assert.equal(topics.data[0].subscription, 'opt_out');
  must(await resend.contacts.topics.update({ id: contact.id, topics: [{ id: topic.id, subscription: 'opt_in' }] }),
    'contacts.topics.update');
  assert.equal(must(await resend.contacts.topics.list({ id: contact.id }), 'contacts.topics.list').data[0].subscription,
    'opt_in');

  const segment2 = must(await resend.segments.create({ name: 'Beta' }), 'segments.create 2');
  must(await resend.contacts.segments.add({ contactId: contact.id, segmentId: segment2.id }), 'contacts.segments.add');
  assert.equal(must(await resend.contacts.segments.list({ contactId: contact.id }), 'contacts.segments.list').data.length, 2);
  must(await resend.contacts.segments.remove({ contactId: contact.id, segmentId: segment2.id }), 'contacts.segments.remove');

  const bad = await resend.contacts.create({ email: 'b@example.com', properties: { colour: 'red' } });
  assert.equal(bad.error?.statusCode, 422);
  assert.match(bad.error.message, /colour/);

  must(await resend.contacts.remove({ email: 'ada@example.com' }), 'contacts.remove');
  must(await resend.topics.remove(topic.id), 'topics.remove');
  must(await resend.segments.remove(segment.id), 'segments.remove');
  must(await resend.contactProperties.remove(prop.id), 'contactProperties.remove');
  console.log('ok');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
