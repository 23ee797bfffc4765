// must returns an SDK call's data, or prints the step and the SDK error
// and exits non-zero: the scripts the Go tests run print one JSON line of
// results, or fail naming the call that failed.
function must(step, res) {
  if (res.error) {
    console.error(step, JSON.stringify(res.error));
    process.exit(1);
  }
  return res.data;
}

// refused returns the SDK error of a call that must fail, or prints the
// step and what it answered and exits non-zero.
function refused(step, res) {
  if (!res.error) {
    console.error(step, 'succeeded:', JSON.stringify(res.data));
    process.exit(1);
  }
  return res.error;
}

module.exports = { must, refused };
