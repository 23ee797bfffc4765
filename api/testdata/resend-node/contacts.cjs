// Drives Posthaste with Resend's official Node SDK, unchanged: the SDK
// reads RESEND_BASE_URL; RESEND_API_KEY is the key. Prints "ok" or throws.
'use strict';
const assert = require('node:assert/strict');
const { Resend } = require('resend');

// must unwraps the SDK's {data, error} result.
const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);

  const prop = must('contactProperties.create',
    await resend.contactProperties.create({ key: 'plan', type: 'string', fallbackValue: 'free' }));
  assert.ok(prop.id);
  must('contactProperties.create number', await resend.contactProperties.create({ key: 'seats', type: 'number' }));
  const gotProp = must('contactProperties.get', await resend.contactProperties.get(prop.id));
  assert.equal(gotProp.key, 'plan');
  must('contactProperties.update', await resend.contactProperties.update({ id: prop.id, fallbackValue: 'trial' }));
  const props = must('contactProperties.list', await resend.contactProperties.list());
  assert.equal(props.data.length, 2);

  const segment = must('segments.create', await resend.segments.create({ name: 'Early adopters' }));
  assert.ok(segment.id);
  assert.equal(must('segments.get', await resend.segments.get(segment.id)).name, 'Early adopters');
  assert.equal(must('segments.list', await resend.segments.list()).data.length, 1);

  const topic = must('topics.create', await resend.topics.create({ name: 'Releases', defaultSubscription: 'opt_in',
    description: 'New versions' }));
  assert.ok(topic.id);
  must('topics.update', await resend.topics.update({ id: topic.id, name: 'Release notes' }));
  assert.equal(must('topics.get', await resend.topics.get(topic.id)).name, 'Release notes');
  assert.equal(must('topics.list', await resend.topics.list()).data.length, 1);

  const contact = must('contacts.create', await resend.contacts.create({ email: 'Ada@Example.com', firstName: 'Ada',
    lastName: 'Lovelace', properties: { plan: 'pro', seats: 5 }, segments: [{ id: segment.id }],
    topics: [{ id: topic.id, subscription: 'opt_out' }] }));
  assert.ok(contact.id);

  const got = must('contacts.get', await resend.contacts.get({ email: 'ada@example.com' }));
  assert.equal(got.id, contact.id);
  assert.equal(got.first_name, 'Ada');
  assert.deepEqual(got.properties, { plan: 'pro', seats: 5 });

  must('contacts.update', await resend.contacts.update({ id: contact.id, unsubscribed: true, properties: { seats: 6 } }));
  const listed = must('contacts.list by segment', await resend.contacts.list({ segmentId: segment.id }));
  assert.equal(listed.data.length, 1);
  assert.equal(listed.data[0].unsubscribed, true);

  const topics = must('contacts.topics.list', await resend.contacts.topics.list({ id: contact.id }));
  assert.equal(topics.data[0].subscription, 'opt_out');
  must('contacts.topics.update',
    await resend.contacts.topics.update({ id: contact.id, topics: [{ id: topic.id, subscription: 'opt_in' }] }));
  assert.equal(must('contacts.topics.list', await resend.contacts.topics.list({ id: contact.id })).data[0].subscription,
    'opt_in');

  const segment2 = must('segments.create 2', await resend.segments.create({ name: 'Beta' }));
  must('contacts.segments.add', await resend.contacts.segments.add({ contactId: contact.id, segmentId: segment2.id }));
  assert.equal(must('contacts.segments.list', await resend.contacts.segments.list({ contactId: contact.id })).data.length, 2);
  must('contacts.segments.remove', await resend.contacts.segments.remove({ contactId: contact.id, segmentId: segment2.id }));

  const bad = await resend.contacts.create({ email: 'b@example.com', properties: { colour: 'red' } });
  assert.equal(bad.error?.statusCode, 422);
  assert.match(bad.error.message, /colour/);

  must('contacts.remove', await resend.contacts.remove({ email: 'ada@example.com' }));
  must('topics.remove', await resend.topics.remove(topic.id));
  must('segments.remove', await resend.segments.remove(segment.id));
  must('contactProperties.remove', await resend.contactProperties.remove(prop.id));
  console.log('ok');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
