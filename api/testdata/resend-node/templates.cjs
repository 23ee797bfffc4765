// Drives Posthaste's templates with Resend's Node SDK (6.x), unchanged:
// create with variables, get, publish, send with the template by alias,
// update, duplicate, list, remove. Run by TestResendNodeSDKTemplates
// (api/templates_test.go) with RESEND_BASE_URL and RESEND_API_KEY set;
// prints one JSON line of results or exits non-zero with the SDK error.
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const created = must('create', await resend.templates.create({
    name: 'order-confirmation',
    alias: 'node-order',
    from: 'Acme <onboarding@posthaste.test>',
    subject: 'Order {{{PRODUCT}}}',
    html: '<p>{{{PRODUCT}}} costs {{{PRICE}}}</p>',
    variables: [
      { key: 'PRODUCT', type: 'string', fallbackValue: 'item' },
      { key: 'PRICE', type: 'number', fallbackValue: 25 },
    ],
  }));
  const draft = await resend.emails.send({ to: 'delivered@posthaste.test', template: { id: 'node-order' } });
  const got = must('get', await resend.templates.get('node-order'));
  must('publish', await resend.templates.publish(created.id));
  const sent = must('send', await resend.emails.send({
    to: 'delivered@posthaste.test',
    template: { id: 'node-order', variables: { PRODUCT: 'Vintage <Macintosh>', PRICE: 499 } },
  }));
  must('update', await resend.templates.update(created.id, { name: 'renamed' }));
  const dup = must('duplicate', await resend.templates.duplicate('node-order'));
  const list = must('list', await resend.templates.list({ limit: 10 }));
  const removed = must('remove', await resend.templates.remove(dup.id));
  console.log(JSON.stringify({
    created, draftError: draft.error, got, sent, list, removed,
  }));
})().catch((e) => { console.error(e); process.exit(1); });
