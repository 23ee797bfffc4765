// Drives template variables of every Resend type (string, number, boolean,
// object, list) with Resend's Node SDK (6.x), unchanged: templates.create
// with typed fallbacks, templates.get (variables, current_version_id
// before and after publish), emails.send with values of each type, and a
// send whose value has the wrong type. Run by TestResendNodeSDKTemplateVariables
// (api/template_variables_test.go) with RESEND_BASE_URL and RESEND_API_KEY
// set; prints one JSON line of results or exits non-zero with the SDK error.
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const created = must('create', await resend.templates.create({
    name: 'receipt',
    alias: 'node-receipt',
    from: 'Acme <onboarding@posthaste.test>',
    subject: 'Receipt {{{ORDER.id}}} for {{{NAME}}}',
    html: '<p>{{#if VIP}}Dear VIP{{else}}Hello{{/if}} {{{NAME}}}</p>'
      + '<ul>{{#each ITEMS}}<li>{{name}} x{{{qty}}}</li>{{else}}<li>nothing</li>{{/each}}</ul>'
      + '<p>Total {{{TOTAL}}} to {{ORDER.ship.city}}</p>',
    text: '{{#each ITEMS}}- {{this.name}}\n{{/each}}',
    variables: [
      { key: 'NAME', type: 'string', fallbackValue: 'customer' },
      { key: 'TOTAL', type: 'number', fallbackValue: 0 },
      { key: 'VIP', type: 'boolean', fallbackValue: false },
      { key: 'ORDER', type: 'object', fallbackValue: { id: 'n/a', ship: { city: 'nowhere' } } },
      { key: 'ITEMS', type: 'list', fallbackValue: [] },
    ],
  }));
  const draft = must('get draft', await resend.templates.get('node-receipt'));
  must('publish', await resend.templates.publish(created.id));
  const got = must('get', await resend.templates.get(created.id));
  const sent = must('send', await resend.emails.send({
    to: 'delivered@posthaste.test',
    template: {
      id: 'node-receipt',
      variables: {
        NAME: 'Ann <Lee>',
        TOTAL: 12.5,
        VIP: true,
        ORDER: { id: 'A-1', ship: { city: 'Oslo' } },
        ITEMS: [{ name: 'Mug', qty: 2 }, { name: 'Tea & Co', qty: 1 }],
      },
    },
  }));
  const fallbacks = must('send fallbacks', await resend.emails.send({
    to: 'delivered@posthaste.test', template: { id: 'node-receipt' },
  }));
  const wrong = await resend.emails.send({
    to: 'delivered@posthaste.test', template: { id: 'node-receipt', variables: { VIP: 'yes' } },
  });
  const list = must('list', await resend.templates.list({ limit: 10 }));
  console.log(JSON.stringify({
    created, draft, got, sent, fallbacks, wrongError: wrong.error, list,
  }));
})().catch((e) => { console.error(e); process.exit(1); });
