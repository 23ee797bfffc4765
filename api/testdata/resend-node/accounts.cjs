// Drives API keys and usage with Resend's Node SDK (6.x), unchanged: 30
// keys created, then listed without a limit (every key, as Resend
// documents, no has_more) and with one (a page, has_more); one renamed
// with apiKeys.update, a bad name and an unknown key refused; then
// usage.get after one sandbox send. Run by TestResendNodeSDKAccounts
// (api/resend_accounts_compat_test.go) with RESEND_BASE_URL and RESEND_API_KEY set;
// prints one JSON line of results or exits non-zero with the SDK error.
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const created = [];
  for (let i = 0; i < 30; i++) {
    created.push(must('create', await resend.apiKeys.create({ name: `key ${i}`, permission: 'sending_access' })).id);
  }
  const all = must('list all', await resend.apiKeys.list());
  const page = must('list page', await resend.apiKeys.list({ limit: 10 }));
  const updated = must('update', await resend.apiKeys.update(created[0], { name: '  renamed  ' }));
  const renamed = must('list after', await resend.apiKeys.list()).data.find((k) => k.id === created[0]);
  const badName = await resend.apiKeys.update(created[1], { name: '' });
  const unknown = await resend.apiKeys.update('0190a4f0-0000-7000-8000-000000000001', { name: 'x' });
  must('send', await resend.emails.send({ from: 'onboarding@posthaste.test', to: ['delivered@posthaste.test', 'bounced@posthaste.test'],
    subject: 'hi', text: 'hi' }));
  const usage = must('usage', await resend.usage.get());
  console.log(JSON.stringify({
    created: created.length, allCount: all.data.length, allHasMore: all.has_more,
    allIds: all.data.map((k) => k.id), pageCount: page.data.length, pageHasMore: page.has_more,
    updated, renamedName: renamed && renamed.name, badName: badName.error, unknown: unknown.error, usage,
  }));
})();
