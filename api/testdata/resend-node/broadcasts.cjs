// Drives Posthaste's broadcasts with Resend's Node SDK (6.x), unchanged:
// create a segment and a draft, get, list, update (only the name: the
// fields the SDK was not given must stay), send scheduled in natural
// language, get (scheduled), cancel, create one with send: true, remove
// a draft. Run by TestResendNodeSDKBroadcasts (api/broadcasts_test.go)
// with RESEND_BASE_URL and RESEND_API_KEY set; prints one JSON line of
// results or exits non-zero with the SDK error.
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const segment = must('segment', await resend.segments.create({ name: 'Newsletter' }));
  const draft = {
    name: 'November news',
    segmentId: segment.id,
    from: 'Acme <onboarding@posthaste.test>',
    subject: 'Hi {{{FIRST_NAME|there}}}',
    html: '<p>Hello {{{FIRST_NAME|there}}}</p>',
    previewText: 'What is new',
  };
  const created = must('create', await resend.broadcasts.create(draft));
  const got = must('get', await resend.broadcasts.get(created.id));
  const list = must('list', await resend.broadcasts.list({ limit: 10 }));
  const updated = must('update', await resend.broadcasts.update(created.id, { name: 'Renamed' }));
  const afterUpdate = must('get after update', await resend.broadcasts.get(created.id));
  const sent = must('send', await resend.broadcasts.send(created.id, { scheduledAt: 'in 1 hour' }));
  const scheduled = must('get scheduled', await resend.broadcasts.get(created.id));
  const canceled = must('cancel', await resend.broadcasts.cancel(created.id));
  const afterCancel = must('get canceled', await resend.broadcasts.get(created.id));
  const sentNow = must('create and send', await resend.broadcasts.create({ ...draft, name: 'Now', send: true }));
  const now = must('get sent', await resend.broadcasts.get(sentNow.id));
  const other = must('create draft', await resend.broadcasts.create({ ...draft, name: 'Scrap' }));
  const removed = must('remove', await resend.broadcasts.remove(other.id));
  const removedGet = await resend.broadcasts.get(other.id);
  console.log(JSON.stringify({
    segment, created, got, list, updated, afterUpdate, sent, scheduled, canceled, afterCancel, sentNow, now,
    removed, removedGetError: removedGet.error,
  }));
})().catch((e) => { console.error(e); process.exit(1); });
