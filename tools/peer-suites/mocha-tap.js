// A mocha reporter for tools/peer-suites: it writes what mocha's own tap
// reporter writes ("ok N <full title>", "ok N <full title> # SKIP -",
// "not ok N <full title>" with the error indented by two spaces, then the
// counts), but turns a failure's message into a string first, and keeps
// '#' in titles (so a title is what --grep matches). The built-in one
// calls err.message.replace, which throws when a test fails with chai's
// expect.fail(<an Error>) (rabbitmq-stream-js-client's eventually() does),
// and mocha then stops reporting and hangs.
"use strict"

function text(v) {
  try {
    return String(v)
  } catch (e) {
    return Object.prototype.toString.call(v)
  }
}

module.exports = function PeerSuitesTAP(runner) {
  let n = 1
  let passes = 0
  let failures = 0
  let pending = 0
  const out = (s) => process.stdout.write(s + "\n")
  const title = (t) => t.fullTitle()
  const indented = (s) => s.slice(0, 8192).replace(/^/gm, "  ")
  runner.on("test end", () => n++)
  runner.on("pending", (t) => {
    pending++
    out(`ok ${n} ${title(t)} # SKIP -`)
  })
  runner.on("pass", (t) => {
    passes++
    out(`ok ${n} ${title(t)}`)
  })
  runner.on("fail", (t, err) => {
    failures++
    out(`not ok ${n} ${title(t)}`)
    if (err && err.message != null) out(indented(text(err.message)))
    if (err && err.stack != null) out(indented(text(err.stack)))
  })
  runner.once("end", () => {
    out(`# tests ${passes + failures}`)
    out(`# pass ${passes}`)
    out(`# fail ${failures}`)
    out(`1..${passes + failures + pending}`)
  })
}
