// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {Ownable2Step} from "@openzeppelin/contracts/access/Ownable2Step.sol";

/// @title oGPU, the oGPU network's token on Ethereum
/// @notice A fixed supply of 21,000,000 oGPU (18 decimals), minted once to
/// `holder` at construction; there is no mint function. Until the network
/// lives on its own chain, a transfer that buys from or sells to a registered
/// AMM pair pays a tax (5% at deployment, in basis points) to `treasury`,
/// unless either side is exempt. The tax can only go down, never above
/// MAX_TAX_BPS, and removeTaxForever() sets it to zero for good.
///
/// Fee-on-transfer for traders: the pair receives (or the buyer gets) 95% of
/// the amount. A sell through Uniswap V2 Router02's plain functions
/// (swapExactTokensForETH, swapExactTokensForTokens) reverts with
/// "UniswapV2: K" because the router prices the full amount; use the
/// ...SupportingFeeOnTransferTokens variants. On a buy the router's
/// amountOutMin is checked before the tax, so set slippage of at least 5%.
/// A registered Uniswap V3 pool refuses taxed sells; an unregistered pool of
/// any kind is a tax-free venue, so the tax is only as good as the registry.
contract OGPUToken is ERC20, Ownable2Step {
    /// @notice The whole supply, minted once: 21,000,000 oGPU.
    uint256 public constant TOTAL_SUPPLY = 21_000_000 * 10 ** 18;
    /// @notice The tax can never be set above 5.00%.
    uint256 public constant MAX_TAX_BPS = 500;
    uint256 private constant BPS = 10_000;

    /// @notice The current tax in basis points; only ever lowered.
    uint256 public taxBps;
    /// @notice True once removeTaxForever() ran: the tax is zero for good.
    bool public taxRemovedForever;
    /// @notice Where the tax goes.
    address public treasury;
    /// @notice Registered AMM pairs: a transfer from (buy) or to (sell) one is taxed.
    mapping(address => bool) public isPair;
    /// @notice Exempt addresses: a transfer with an exempt side is never taxed.
    mapping(address => bool) public isExempt;

    event TaxLowered(uint256 oldBps, uint256 newBps);
    event TaxRemovedForever();
    event PairSet(address indexed pair, bool isPair);
    event ExemptSet(address indexed account, bool isExempt);
    event TreasurySet(address indexed oldTreasury, address indexed newTreasury);

    /// @notice A new tax must be lower than the current one.
    error TaxCanOnlyGoDown(uint256 currentBps, uint256 requestedBps);
    /// @notice The tax was removed forever; it cannot be changed again.
    error TaxIsRemovedForever();
    /// @notice The zero address is not a valid holder, treasury or pair.
    error ZeroAddress();

    /// @param initialOwner manages pairs, exemptions, the treasury and the tax (2-step ownership transfer).
    /// @param holder receives the whole supply.
    /// @param treasury_ receives the tax.
    /// The owner, the holder and the treasury start exempt.
    constructor(address initialOwner, address holder, address treasury_)
        ERC20("oGPU", "OGPU")
        Ownable(initialOwner)
    {
        if (holder == address(0) || treasury_ == address(0)) revert ZeroAddress();
        treasury = treasury_;
        taxBps = MAX_TAX_BPS;
        _setExempt(initialOwner, true);
        _setExempt(holder, true);
        _setExempt(treasury_, true);
        _mint(holder, TOTAL_SUPPLY);
    }

    /// @notice Lowers the tax to newBps (strictly lower than the current tax).
    function lowerTax(uint256 newBps) external onlyOwner {
        if (taxRemovedForever) revert TaxIsRemovedForever();
        uint256 old = taxBps;
        if (newBps >= old) revert TaxCanOnlyGoDown(old, newBps);
        taxBps = newBps;
        emit TaxLowered(old, newBps);
    }

    /// @notice Sets the tax to zero for good. Cannot be undone.
    function removeTaxForever() external onlyOwner {
        if (taxRemovedForever) revert TaxIsRemovedForever();
        uint256 old = taxBps;
        taxBps = 0;
        taxRemovedForever = true;
        emit TaxLowered(old, 0);
        emit TaxRemovedForever();
    }

    /// @notice Registers (or unregisters) an AMM pair.
    function setPair(address pair, bool registered) external onlyOwner {
        if (pair == address(0)) revert ZeroAddress();
        isPair[pair] = registered;
        emit PairSet(pair, registered);
    }

    /// @notice Exempts (or stops exempting) an account from the tax.
    function setExempt(address account, bool exempt) external onlyOwner {
        _setExempt(account, exempt);
    }

    /// @notice Sends future tax to newTreasury. The new treasury is not made exempt automatically.
    function setTreasury(address newTreasury) external onlyOwner {
        if (newTreasury == address(0)) revert ZeroAddress();
        emit TreasurySet(treasury, newTreasury);
        treasury = newTreasury;
    }

    function _setExempt(address account, bool exempt) private {
        isExempt[account] = exempt;
        emit ExemptSet(account, exempt);
    }

    /// @dev Taxes a transfer (not a mint or burn) with a registered pair on
    /// one side and no exempt side: value*taxBps/10000 (rounded down) goes to
    /// the treasury, the rest to `to`.
    function _update(address from, address to, uint256 value) internal override {
        uint256 bps = taxBps;
        if (
            bps != 0 && from != address(0) && to != address(0) && (isPair[from] || isPair[to]) && !isExempt[from]
                && !isExempt[to]
        ) {
            uint256 fee = (value * bps) / BPS;
            super._update(from, treasury, fee);
            super._update(from, to, value - fee);
        } else {
            super._update(from, to, value);
        }
    }
}
