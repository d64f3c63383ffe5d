// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";

/// @title The oGPU bridge between Ethereum and the oGPU app-chain
/// @notice Locks oGPU on deposit and releases it on withdrawals signed by
/// validators holding strictly more than 2/3 of the stored validator set's
/// power. Nothing is minted on either side.
///
/// Validator set. Only its checkpoint is stored (as in Gravity): callers pass
/// the current set with each call and the contract checks it hashes to the
/// stored checkpoint. A set lists signer addresses sorted ascending with no
/// duplicates and no zero address, one non-zero uint32 power each (the
/// app-chain normalizes powers so they fit), and a nonce that goes up by
/// exactly one per update.
///
/// Digests. Every signed digest starts with `domain` =
/// keccak256(abi.encode("ogpu-bridge-v1", block.chainid, address(this),
/// appChainIdHash)), so a signature is valid for one contract on one
/// Ethereum chain for one app-chain only:
///   checkpoint(set) = keccak256(abi.encode(domain, "checkpoint", nonce, validators, powers))
///   withdrawal      = keccak256(abi.encode(domain, "withdraw", nonce, to, amount))
/// Validators sign the EIP-191 form of these digests
/// (keccak256("\x19Ethereum Signed Message:\n32" || digest), what
/// MessageHashUtils.toEthSignedMessageHash gives): such a signature can never
/// be mistaken for an Ethereum transaction signature.
///
/// Signatures. sigs[i] belongs to validators[i]; an all-zero entry (v, r and s
/// all zero: no real signature has r == 0) marks a validator that did not
/// sign. v is 27 or 28 (0 and 1 are accepted and mean 27 and 28, the form
/// go-ethereum's crypto.Sign gives).
/// A present signature that does not recover to its validator (forged,
/// malformed, or high-s: OpenZeppelin's ECDSA.tryRecover refuses s in the
/// upper half) reverts the whole call. The call goes through only when the
/// signed power is strictly more than 2/3 of the total: signed * 3 > total * 2.
///
/// Pause. The guardian (an independent key or small multisig) can only
/// pause(): deposits and withdrawals stop; it can move no funds and cannot
/// unpause. unpause() needs a > 2/3 signature of the current set over
///   keccak256(abi.encode(domain, "unpause", nonce)), nonce = lastUnpauseNonce + 1,
/// so an old unpause signature cannot lift a later pause. Valset updates stay
/// open while paused: honest validators must be able to rotate out keys.
///
/// Outflow limit. A signed withdrawal is paid at once only when it is below
/// largeWithdrawal and fits the outflow bucket: a token bucket of outflowCap
/// that refills at outflowCap per 24 h (so at most outflowCap leaves at once
/// and at most 2 x outflowCap in any 24 h without a delay). Any other
/// withdrawal is queued (WithdrawalQueued) and anyone can pay it with
/// executeQueued() once withdrawalDelay has passed; the guardian's pause
/// blocks that too, which is what the delay is for. A queued withdrawal is
/// never cancelled (the app-chain has already debited it). Withdrawn is
/// emitted once per nonce, when the tokens actually leave.
///
/// Valset timelock. An update whose new set keeps less than 2/3 of the
/// current set's power distribution (overlap = sum over validators in both
/// sets of min(old power share, new power share); the update is delayed when
/// overlap < 2/3, i.e. it moves more than 1/3 of the power) is not applied at
/// once: it is queued (ValsetQueued) and anyone applies it with
/// applyQueuedValset() after valsetDelay, unless the guardian has paused.
/// Meanwhile the current set keeps signing. An update that moves at most 1/3
/// applies at once and makes a queued one stale. Limitation: a sequence of
/// updates each moving at most 1/3 is not delayed; the app-chain's signers
/// must refuse to sign such a sequence faster than valsetDelay.
contract OGPUBridge {
    using SafeERC20 for IERC20;

    /// @notice A validator set as callers pass it (only its checkpoint is stored).
    struct Valset {
        address[] validators;
        uint32[] powers;
        uint64 nonce;
    }

    /// @notice One validator's signature; all zero means this validator did not sign.
    struct Sig {
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    /// @notice The locked token.
    IERC20 public immutable token;
    /// @notice The replay domain bound into every digest (see the contract doc).
    bytes32 public immutable domain;
    /// @notice The app-chain this bridge serves, as keccak256 of its chain id.
    bytes32 public immutable appChainIdHash;

    /// @notice The checkpoint of the current validator set.
    bytes32 public valsetCheckpoint;
    /// @notice The current validator set's nonce.
    uint64 public valsetNonce;
    /// @notice The last deposit nonce handed out (deposits are numbered 1, 2, 3, ... with no gap).
    uint64 public lastDepositNonce;
    /// @notice executed[n] is true once withdrawal n has been paid out.
    mapping(uint64 => bool) public executed;
    /// @notice The only key that can pause; it can do nothing else.
    address public immutable guardian;
    /// @notice True while deposits and withdrawals are stopped.
    bool public paused;
    /// @notice The nonce of the last unpause; the next one signs lastUnpauseNonce + 1.
    uint64 public lastUnpauseNonce;
    /// @notice Size of the outflow bucket, refilled at this much per 24 h.
    uint256 public immutable outflowCap;
    /// @notice Withdrawals of at least this amount always wait withdrawalDelay.
    uint256 public immutable largeWithdrawal;
    /// @notice Seconds a queued withdrawal waits before executeQueued() pays it.
    uint64 public immutable withdrawalDelay;
    /// @notice Bucket usage as of outflowUpdated (see outflowAvailable()).
    uint256 public outflowUsed;
    uint64 public outflowUpdated;

    /// @notice A withdrawal waiting for its delay.
    struct Queued {
        address to;
        uint256 amount;
        uint64 readyAt;
    }

    /// @notice Queued withdrawals by nonce (amount zero: none).
    mapping(uint64 => Queued) public queued;
    /// @notice Seconds a valset update that moves more than 1/3 of the power waits.
    uint64 public immutable valsetDelay;
    /// @notice The checkpoint of the queued valset update (zero: none).
    bytes32 public pendingValsetCheckpoint;
    /// @notice When the queued valset update can be applied.
    uint64 public pendingValsetReadyAt;

    event Deposited(uint64 indexed nonce, address indexed from, address recipient, uint256 amount);
    event Withdrawn(uint64 indexed nonce, address indexed to, uint256 amount);
    event WithdrawalQueued(uint64 indexed nonce, address indexed to, uint256 amount, uint64 readyAt);
    event ValsetQueued(uint64 indexed nonce, bytes32 checkpoint, uint64 readyAt, address[] validators, uint32[] powers);
    event Paused(address indexed guardian);
    event Unpaused(uint64 indexed nonce);
    event ValsetUpdated(uint64 indexed nonce, bytes32 checkpoint, address[] validators, uint32[] powers);

    /// @notice The set is empty, or its validators and powers differ in length.
    error MalformedValset();
    /// @notice validators[index] is zero, not above validators[index-1], or has zero power.
    error InvalidValidator(uint256 index);
    /// @notice The set passed as current does not hash to the stored checkpoint.
    error WrongCheckpoint(bytes32 given, bytes32 stored);
    /// @notice A valset update must carry exactly the current nonce + 1.
    error WrongValsetNonce(uint64 given, uint64 want);
    /// @notice sigs must have one entry per validator of the current set.
    error SignatureCount(uint256 given, uint256 want);
    /// @notice sigs[index] has a v other than 0, 1, 27 or 28.
    error InvalidV(uint256 index, uint8 v);
    /// @notice sigs[index] does not recover to validators[index] (forged, malformed or high-s).
    error InvalidSignature(uint256 index);
    /// @notice The valid signatures hold signed of total power; strictly more than 2/3 is needed.
    error InsufficientPower(uint256 signed, uint256 total);
    /// @notice Withdrawal nonce already paid out.
    error AlreadyExecuted(uint64 nonce);
    error ZeroAddress();
    /// @notice Deposits and withdrawals are paused until the validators sign an unpause.
    error IsPaused();
    /// @notice unpause() while not paused.
    error NotPaused();
    /// @notice Only the guardian may pause.
    error NotGuardian(address caller);
    /// @notice An unpause must sign lastUnpauseNonce + 1.
    error WrongUnpauseNonce(uint64 given, uint64 want);
    error ZeroAmount();
    /// @notice outflowCap, largeWithdrawal and withdrawalDelay must all be non-zero.
    error BadLimits();
    /// @notice No withdrawal with this nonce is queued (never queued, or already paid).
    error NotQueued(uint64 nonce);
    /// @notice The queued withdrawal can be paid from readyAt on.
    error NotReady(uint64 nonce, uint64 readyAt);
    /// @notice The set given is not the queued valset update.
    error NotQueuedValset(bytes32 checkpoint);

    /// @param token_ the oGPU token (it should exempt this bridge from its tax).
    /// @param appChainIdHash_ keccak256 of the app-chain's chain id.
    /// @param initial the first validator set (its nonce is usually 0).
    /// @param guardian_ the key that may pause (non-zero).
    /// @param outflowCap_ the outflow bucket (see the contract doc).
    /// @param largeWithdrawal_ amounts from which a withdrawal always waits.
    /// @param withdrawalDelay_ seconds a queued withdrawal waits.
    /// @param valsetDelay_ seconds a valset update that moves more than 1/3 of the power waits.
    constructor(
        IERC20 token_,
        bytes32 appChainIdHash_,
        Valset memory initial,
        address guardian_,
        uint256 outflowCap_,
        uint256 largeWithdrawal_,
        uint64 withdrawalDelay_,
        uint64 valsetDelay_
    ) {
        if (address(token_) == address(0) || guardian_ == address(0)) revert ZeroAddress();
        if (outflowCap_ == 0 || largeWithdrawal_ == 0 || withdrawalDelay_ == 0 || valsetDelay_ == 0) {
            revert BadLimits();
        }
        valsetDelay = valsetDelay_;
        outflowCap = outflowCap_;
        largeWithdrawal = largeWithdrawal_;
        withdrawalDelay = withdrawalDelay_;
        outflowUpdated = uint64(block.timestamp);
        token = token_;
        guardian = guardian_;
        appChainIdHash = appChainIdHash_;
        bytes32 d = keccak256(abi.encode("ogpu-bridge-v1", block.chainid, address(this), appChainIdHash_));
        domain = d;
        _validate(initial);
        valsetCheckpoint = _checkpoint(d, initial);
        valsetNonce = initial.nonce;
        emit ValsetUpdated(initial.nonce, valsetCheckpoint, initial.validators, initial.powers);
    }

    /// @notice Locks amount oGPU from the caller for recipient on the app-chain.
    /// The Deposited event carries what the bridge actually received (its
    /// balance difference), under the next deposit nonce.
    function deposit(address recipient, uint256 amount) external returns (uint64 nonce) {
        if (paused) revert IsPaused();
        if (recipient == address(0)) revert ZeroAddress();
        if (amount == 0) revert ZeroAmount();
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = token.balanceOf(address(this)) - before;
        if (received == 0) revert ZeroAmount();
        nonce = ++lastDepositNonce;
        emit Deposited(nonce, msg.sender, recipient, received);
    }

    /// @notice Pays withdrawal nonce (amount oGPU to `to`) once, signed by more
    /// than 2/3 of the current set's power. Anyone may relay it; nonces
    /// execute in any order.
    function withdraw(Valset calldata current, uint64 nonce, address to, uint256 amount, Sig[] calldata sigs)
        external
    {
        if (paused) revert IsPaused();
        if (to == address(0)) revert ZeroAddress();
        if (amount == 0) revert ZeroAmount();
        if (executed[nonce]) revert AlreadyExecuted(nonce);
        _checkCurrent(current);
        _checkSignatures(current, withdrawDigest(nonce, to, amount), sigs);
        executed[nonce] = true;
        uint256 used = _outflowUsedNow();
        if (amount >= largeWithdrawal || used + amount > outflowCap) {
            uint64 readyAt = uint64(block.timestamp) + withdrawalDelay;
            queued[nonce] = Queued(to, amount, readyAt);
            emit WithdrawalQueued(nonce, to, amount, readyAt);
            return;
        }
        outflowUsed = used + amount;
        outflowUpdated = uint64(block.timestamp);
        token.safeTransfer(to, amount);
        emit Withdrawn(nonce, to, amount);
    }

    /// @notice Pays a queued withdrawal once its delay has passed; anyone may call it.
    function executeQueued(uint64 nonce) external {
        if (paused) revert IsPaused();
        Queued memory q = queued[nonce];
        if (q.amount == 0) revert NotQueued(nonce);
        if (block.timestamp < q.readyAt) revert NotReady(nonce, q.readyAt);
        delete queued[nonce];
        token.safeTransfer(q.to, q.amount);
        emit Withdrawn(nonce, q.to, q.amount);
    }

    /// @notice How much can be withdrawn right now without a delay.
    function outflowAvailable() external view returns (uint256) {
        return outflowCap - _outflowUsedNow();
    }

    function _outflowUsedNow() private view returns (uint256) {
        uint256 refill = (block.timestamp - outflowUpdated) * outflowCap / 1 days;
        return refill >= outflowUsed ? 0 : outflowUsed - refill;
    }

    /// @notice Replaces the validator set with next (nonce + 1), signed by more
    /// than 2/3 of the current set's power over next's checkpoint.
    function updateValset(Valset calldata current, Valset calldata next, Sig[] calldata sigs) external {
        if (next.nonce != current.nonce + 1) revert WrongValsetNonce(next.nonce, current.nonce + 1);
        _validate(next);
        _checkCurrent(current);
        bytes32 cp = _checkpoint(domain, next);
        _checkSignatures(current, cp, sigs);
        if (_movesMoreThanAThird(current, next)) {
            uint64 readyAt = uint64(block.timestamp) + valsetDelay;
            pendingValsetCheckpoint = cp;
            pendingValsetReadyAt = readyAt;
            emit ValsetQueued(next.nonce, cp, readyAt, next.validators, next.powers);
            return;
        }
        _applyValset(next, cp);
    }

    /// @notice Applies the queued valset update once valsetDelay has passed;
    /// anyone may call it, not while paused.
    function applyQueuedValset(Valset calldata next) external {
        if (paused) revert IsPaused();
        bytes32 cp = _checkpoint(domain, next);
        if (cp != pendingValsetCheckpoint || cp == bytes32(0)) revert NotQueuedValset(cp);
        if (next.nonce != valsetNonce + 1) revert WrongValsetNonce(next.nonce, valsetNonce + 1);
        if (block.timestamp < pendingValsetReadyAt) revert NotReady(next.nonce, pendingValsetReadyAt);
        _applyValset(next, cp);
    }

    function _applyValset(Valset calldata next, bytes32 cp) private {
        valsetCheckpoint = cp;
        valsetNonce = next.nonce;
        delete pendingValsetCheckpoint;
        delete pendingValsetReadyAt;
        emit ValsetUpdated(next.nonce, cp, next.validators, next.powers);
    }

    /// @dev overlap/(oldTotal*newTotal) = sum over common validators of
    /// min(old_i/oldTotal, new_i/newTotal); true when that is below 2/3.
    /// Both sets are sorted ascending, so one merge walk finds the common ones.
    function _movesMoreThanAThird(Valset calldata cur, Valset calldata next) private pure returns (bool) {
        uint256 oldTotal;
        uint256 newTotal;
        for (uint256 i = 0; i < cur.powers.length; i++) {
            oldTotal += cur.powers[i];
        }
        for (uint256 j = 0; j < next.powers.length; j++) {
            newTotal += next.powers[j];
        }
        uint256 overlap;
        uint256 a;
        uint256 b;
        while (a < cur.validators.length && b < next.validators.length) {
            address x = cur.validators[a];
            address y = next.validators[b];
            if (x < y) {
                a++;
            } else if (y < x) {
                b++;
            } else {
                uint256 o = uint256(cur.powers[a]) * newTotal;
                uint256 n = uint256(next.powers[b]) * oldTotal;
                overlap += o < n ? o : n;
                a++;
                b++;
            }
        }
        return overlap * 3 < oldTotal * newTotal * 2;
    }

    /// @notice Stops deposits and withdrawals; only the guardian may call it.
    function pause() external {
        if (msg.sender != guardian) revert NotGuardian(msg.sender);
        if (paused) revert IsPaused();
        paused = true;
        emit Paused(msg.sender);
    }

    /// @notice Lifts a pause, signed by more than 2/3 of the current set over
    /// unpauseDigest(lastUnpauseNonce + 1).
    function unpause(Valset calldata current, uint64 nonce, Sig[] calldata sigs) external {
        if (!paused) revert NotPaused();
        if (nonce != lastUnpauseNonce + 1) revert WrongUnpauseNonce(nonce, lastUnpauseNonce + 1);
        _checkCurrent(current);
        _checkSignatures(current, unpauseDigest(nonce), sigs);
        lastUnpauseNonce = nonce;
        paused = false;
        emit Unpaused(nonce);
    }

    /// @notice The digest validators sign (in EIP-191 form) to lift a pause.
    function unpauseDigest(uint64 nonce) public view returns (bytes32) {
        return keccak256(abi.encode(domain, "unpause", nonce));
    }

    /// @notice The digest validators sign (in EIP-191 form) for a withdrawal.
    function withdrawDigest(uint64 nonce, address to, uint256 amount) public view returns (bytes32) {
        return keccak256(abi.encode(domain, "withdraw", nonce, to, amount));
    }

    /// @notice The checkpoint of a set (what validators sign, in EIP-191 form, to adopt it).
    function checkpoint(Valset calldata vs) external view returns (bytes32) {
        return _checkpoint(domain, vs);
    }

    function _checkpoint(bytes32 d, Valset memory vs) private pure returns (bytes32) {
        return keccak256(abi.encode(d, "checkpoint", vs.nonce, vs.validators, vs.powers));
    }

    function _validate(Valset memory vs) private pure {
        uint256 n = vs.validators.length;
        if (n == 0 || n != vs.powers.length) revert MalformedValset();
        address prev = address(0);
        for (uint256 i = 0; i < n; i++) {
            address a = vs.validators[i];
            // a > prev with prev starting at zero also refuses the zero address.
            if (a <= prev || vs.powers[i] == 0) revert InvalidValidator(i);
            prev = a;
        }
    }

    function _checkCurrent(Valset calldata current) private view {
        bytes32 cp = _checkpoint(domain, current);
        if (cp != valsetCheckpoint) revert WrongCheckpoint(cp, valsetCheckpoint);
    }

    /// @dev current has been checked against the stored checkpoint, so it is
    /// sorted and unique: each signer counts once.
    function _checkSignatures(Valset calldata current, bytes32 digest, Sig[] calldata sigs) private pure {
        uint256 n = current.validators.length;
        if (sigs.length != n) revert SignatureCount(sigs.length, n);
        bytes32 h = MessageHashUtils.toEthSignedMessageHash(digest);
        uint256 total;
        uint256 signed;
        for (uint256 i = 0; i < n; i++) {
            uint256 p = current.powers[i];
            total += p;
            uint8 v = sigs[i].v;
            if (v == 0 && sigs[i].r == 0 && sigs[i].s == 0) continue;
            if (v < 27) v += 27;
            if (v != 27 && v != 28) revert InvalidV(i, sigs[i].v);
            (address rec, ECDSA.RecoverError err,) = ECDSA.tryRecover(h, v, sigs[i].r, sigs[i].s);
            if (err != ECDSA.RecoverError.NoError || rec != current.validators[i]) revert InvalidSignature(i);
            signed += p;
        }
        if (signed * 3 <= total * 2) revert InsufficientPower(signed, total);
    }
}
