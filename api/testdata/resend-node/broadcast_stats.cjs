// Reads a sent broadcast's statistics with Resend's Node SDK (6.x),
// unchanged: recipients who clicked (count, clicked_links), who bounced
// (bounce_type, and the bounceType filter), and the clicked links, one
// page of one link and then the next. Run by
// TestBroadcastRecipientFieldsAndClickedLinks (api/broadcasts_test.go)
// with RESEND_BASE_URL, RESEND_API_KEY and BROADCAST_ID set; prints one
// JSON line of results or exits non-zero with the SDK error.
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const id = process.env.BROADCAST_ID;
  const clicked = must('clicked', await resend.broadcasts.recipients(id, { type: 'clicked' }));
  const bounced = must('bounced', await resend.broadcasts.recipients(id, { type: 'bounced', bounceType: 'transient' }));
  const permanent = must('permanent', await resend.broadcasts.recipients(id, { type: 'bounced', bounceType: 'permanent' }));
  const links = must('links', await resend.broadcasts.clickedLinks(id));
  const first = must('links page 1', await resend.broadcasts.clickedLinks(id, { limit: 1 }));
  const second = must('links page 2', await resend.broadcasts.clickedLinks(id, { limit: 1, after: first.data[0].id }));
  console.log(JSON.stringify({ clicked, bounced, permanent, links, first, second }));
})().catch((e) => { console.error(e); process.exit(1); });
