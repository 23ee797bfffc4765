// Drives Posthaste's GET /emails/metrics with Resend's Node SDK (6.x),
// unchanged: the totals of every metric, then a daily breakdown by period
// and domain of three metrics in a time zone, and an unknown metric (the
// SDK passes it on; the error is printed, not fatal). Run by
// TestResendNodeSDKMetrics (api/metrics_test.go) with RESEND_BASE_URL,
// RESEND_API_KEY and START_DATE set; prints one JSON line of results or
// exits non-zero with the SDK error.
const { Resend } = require('resend');

const { must } = require('./must.cjs');

(async () => {
  const resend = new Resend(process.env.RESEND_API_KEY);
  const totals = must('totals', await resend.emails.metrics({ startDate: process.env.START_DATE }));
  const breakdown = must('breakdown', await resend.emails.metrics({
    startDate: process.env.START_DATE,
    timezone: 'Asia/Tokyo',
    granularity: 'daily',
    metrics: ['sent', 'unique_opened', 'delivery_rate'],
    dimensions: ['period', 'domain'],
  }));
  const bad = await resend.emails.metrics({ metrics: ['nope'] });
  console.log(JSON.stringify({ totals, breakdown, badError: bad.error }));
})();
