// build.js compiles src/*.sol with solc used as a library (never the solcjs
// CLI: piped, its --standard-json output is cut at 64 KiB) and writes one
// artifacts/<Contract>.json per contract: its ABI and creation and runtime
// bytecode. `node build.js DIR` writes them to DIR instead. The output is
// deterministic: `npm ci && node build.js` on a clean checkout must give no
// diff (make contracts-check, scripts/contracts-check.sh).
'use strict';
const fs = require('fs');
const path = require('path');
const solc = require('solc');

const SOLC_VERSION = '0.8.37';
// evmVersion is pinned: solc's default moves with each release (0.8.37
// defaults to osaka). cancun (live on Ethereum since March 2024) is the
// newest fork that mainnet, the major L2s and go-ethereum's simulated
// backend and geth --dev all run, so the same audited bytes deploy
// everywhere; a later fork would buy nothing these contracts use.
const EVM_VERSION = 'cancun';
// The optimizer is pinned too: it changes the bytecode, hence the artifacts.
const OPTIMIZER = { enabled: true, runs: 200 };

const root = __dirname;
if (!solc.version().startsWith(SOLC_VERSION + '+')) {
  console.error(`build.js: solc ${solc.version()} is installed, ${SOLC_VERSION} is pinned: run npm ci in contracts/`);
  process.exit(1);
}

const srcDir = path.join(root, 'src');
const sources = {};
for (const f of fs.readdirSync(srcDir).filter((f) => f.endsWith('.sol')).sort()) {
  sources['src/' + f] = { content: fs.readFileSync(path.join(srcDir, f), 'utf8') };
}
const input = {
  language: 'Solidity',
  sources,
  settings: {
    evmVersion: EVM_VERSION,
    optimizer: OPTIMIZER,
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
  },
};

// Imports resolve under node_modules/ only (e.g. @openzeppelin/contracts/...).
function findImports(p) {
  const full = path.join(root, 'node_modules', p);
  if (!full.startsWith(path.join(root, 'node_modules') + path.sep) || !fs.existsSync(full)) {
    return { error: `import ${p} not found under contracts/node_modules: run npm ci in contracts/` };
  }
  return { contents: fs.readFileSync(full, 'utf8') };
}

const out = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
let failed = false;
for (const e of out.errors || []) {
  console.error(e.formattedMessage || e.message);
  if (e.severity === 'error') failed = true;
}
if (failed) process.exit(1);

const artDir = process.argv[2] ? path.resolve(process.argv[2]) : path.join(root, 'artifacts');
fs.mkdirSync(artDir, { recursive: true });
for (const file of Object.keys(sources)) {
  for (const [name, c] of Object.entries(out.contracts[file] || {})) {
    const art = {
      contractName: name,
      sourceName: file,
      compiler: { version: solc.version(), evmVersion: EVM_VERSION, optimizer: OPTIMIZER },
      abi: c.abi,
      bytecode: '0x' + c.evm.bytecode.object,
      deployedBytecode: '0x' + c.evm.deployedBytecode.object,
    };
    fs.writeFileSync(path.join(artDir, name + '.json'), JSON.stringify(art, null, 2) + '\n');
    console.log(`build.js: ${path.join(artDir, name + '.json')} (${c.evm.bytecode.object.length / 2} B init, ${c.evm.deployedBytecode.object.length / 2} B runtime)`);
  }
}
