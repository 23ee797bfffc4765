// Sends Resend's test emails with Resend's Node SDK (6.x), unchanged, as a
// project written for Resend does: from onboarding@resend.dev to
// delivered@resend.dev and bounced@resend.dev (each its own email), then
// from another resend.dev address and to a stranger (both refused; the
// errors are printed, not fatal). With IDS set (comma-separated), it gets
// those emails instead. Run by TestResendNodeSDKSandbox (api) and
// TestDevResendTestAddresses (cmd/posthaste) with RESEND_BASE_URL and
// RESEND_API_KEY set; prints one JSON line of results or exits non-zero
// with the SDK error.
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  if (process.env.IDS) {
    const emails = [];
    for (const id of process.env.IDS.split(',')) {
      emails.push(must('get ' + id, await resend.emails.get(id)));
    }
    console.log(JSON.stringify({ emails }));
    return;
  }
  const send = (to) => resend.emails.send({
    from: 'Acme <onboarding@resend.dev>',
    to,
    subject: 'Hello World',
    html: '<p>Congrats on sending your <strong>first email</strong>!</p>',
  });
  const delivered = must('delivered', await send('delivered@resend.dev'));
  const bounced = must('bounced', await send(['bounced+signup@resend.dev']));
  const otherSender = await resend.emails.send({
    from: 'hello@resend.dev', to: 'delivered@resend.dev', subject: 'x', text: 'x',
  });
  const stranger = await send('someone@example.com');
  console.log(JSON.stringify({
    delivered: delivered.id, bounced: bounced.id,
    otherSenderError: otherSender.error, strangerError: stranger.error,
  }));
})();
