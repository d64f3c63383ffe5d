// Code generated via abigen V2 - DO NOT EDIT.
// This file is a generated binding and any manual changes will be lost.

package contracts

import (
	"bytes"
	"errors"
	"math/big"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// Reference imports to suppress errors if they are not otherwise used.
var (
	_ = bytes.Equal
	_ = errors.New
	_ = big.NewInt
	_ = common.Big1
	_ = types.BloomLookup
	_ = abi.ConvertType
)

// OGPUBridgeSig is an auto generated low-level Go binding around an user-defined struct.
type OGPUBridgeSig struct {
	V uint8
	R [32]byte
	S [32]byte
}

// OGPUBridgeValset is an auto generated low-level Go binding around an user-defined struct.
type OGPUBridgeValset struct {
	Validators []common.Address
	Powers     []uint32
	Nonce      uint64
}

// OGPUBridgeMetaData contains all meta data concerning the OGPUBridge contract.
var OGPUBridgeMetaData = bind.MetaData{
	ABI: "[{\"inputs\":[{\"internalType\":\"contractIERC20\",\"name\":\"token_\",\"type\":\"address\"},{\"internalType\":\"bytes32\",\"name\":\"appChainIdHash_\",\"type\":\"bytes32\"},{\"components\":[{\"internalType\":\"address[]\",\"name\":\"validators\",\"type\":\"address[]\"},{\"internalType\":\"uint32[]\",\"name\":\"powers\",\"type\":\"uint32[]\"},{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"}],\"internalType\":\"structOGPUBridge.Valset\",\"name\":\"initial\",\"type\":\"tuple\"},{\"internalType\":\"address\",\"name\":\"guardian_\",\"type\":\"address\"}],\"stateMutability\":\"nonpayable\",\"type\":\"constructor\"},{\"inputs\":[{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"}],\"name\":\"AlreadyExecuted\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"signed\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"total\",\"type\":\"uint256\"}],\"name\":\"InsufficientPower\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"index\",\"type\":\"uint256\"}],\"name\":\"InvalidSignature\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"index\",\"type\":\"uint256\"},{\"internalType\":\"uint8\",\"name\":\"v\",\"type\":\"uint8\"}],\"name\":\"InvalidV\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"index\",\"type\":\"uint256\"}],\"name\":\"InvalidValidator\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"IsPaused\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"MalformedValset\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"caller\",\"type\":\"address\"}],\"name\":\"NotGuardian\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"NotPaused\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"token\",\"type\":\"address\"}],\"name\":\"SafeERC20FailedOperation\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"given\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"want\",\"type\":\"uint256\"}],\"name\":\"SignatureCount\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"given\",\"type\":\"bytes32\"},{\"internalType\":\"bytes32\",\"name\":\"stored\",\"type\":\"bytes32\"}],\"name\":\"WrongCheckpoint\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint64\",\"name\":\"given\",\"type\":\"uint64\"},{\"internalType\":\"uint64\",\"name\":\"want\",\"type\":\"uint64\"}],\"name\":\"WrongUnpauseNonce\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint64\",\"name\":\"given\",\"type\":\"uint64\"},{\"internalType\":\"uint64\",\"name\":\"want\",\"type\":\"uint64\"}],\"name\":\"WrongValsetNonce\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"ZeroAddress\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"ZeroAmount\",\"type\":\"error\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"from\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"address\",\"name\":\"recipient\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"}],\"name\":\"Deposited\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"guardian\",\"type\":\"address\"}],\"name\":\"Paused\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"}],\"name\":\"Unpaused\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"},{\"indexed\":false,\"internalType\":\"bytes32\",\"name\":\"checkpoint\",\"type\":\"bytes32\"},{\"indexed\":false,\"internalType\":\"address[]\",\"name\":\"validators\",\"type\":\"address[]\"},{\"indexed\":false,\"internalType\":\"uint32[]\",\"name\":\"powers\",\"type\":\"uint32[]\"}],\"name\":\"ValsetUpdated\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"to\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"}],\"name\":\"Withdrawn\",\"type\":\"event\"},{\"inputs\":[],\"name\":\"appChainIdHash\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"components\":[{\"internalType\":\"address[]\",\"name\":\"validators\",\"type\":\"address[]\"},{\"internalType\":\"uint32[]\",\"name\":\"powers\",\"type\":\"uint32[]\"},{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"}],\"internalType\":\"structOGPUBridge.Valset\",\"name\":\"vs\",\"type\":\"tuple\"}],\"name\":\"checkpoint\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"recipient\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"}],\"name\":\"deposit\",\"outputs\":[{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"}],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"domain\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint64\",\"name\":\"\",\"type\":\"uint64\"}],\"name\":\"executed\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"guardian\",\"outputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"lastDepositNonce\",\"outputs\":[{\"internalType\":\"uint64\",\"name\":\"\",\"type\":\"uint64\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"lastUnpauseNonce\",\"outputs\":[{\"internalType\":\"uint64\",\"name\":\"\",\"type\":\"uint64\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"pause\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"paused\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"token\",\"outputs\":[{\"internalType\":\"contractIERC20\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"components\":[{\"internalType\":\"address[]\",\"name\":\"validators\",\"type\":\"address[]\"},{\"internalType\":\"uint32[]\",\"name\":\"powers\",\"type\":\"uint32[]\"},{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"}],\"internalType\":\"structOGPUBridge.Valset\",\"name\":\"current\",\"type\":\"tuple\"},{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"},{\"components\":[{\"internalType\":\"uint8\",\"name\":\"v\",\"type\":\"uint8\"},{\"internalType\":\"bytes32\",\"name\":\"r\",\"type\":\"bytes32\"},{\"internalType\":\"bytes32\",\"name\":\"s\",\"type\":\"bytes32\"}],\"internalType\":\"structOGPUBridge.Sig[]\",\"name\":\"sigs\",\"type\":\"tuple[]\"}],\"name\":\"unpause\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"}],\"name\":\"unpauseDigest\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"components\":[{\"internalType\":\"address[]\",\"name\":\"validators\",\"type\":\"address[]\"},{\"internalType\":\"uint32[]\",\"name\":\"powers\",\"type\":\"uint32[]\"},{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"}],\"internalType\":\"structOGPUBridge.Valset\",\"name\":\"current\",\"type\":\"tuple\"},{\"components\":[{\"internalType\":\"address[]\",\"name\":\"validators\",\"type\":\"address[]\"},{\"internalType\":\"uint32[]\",\"name\":\"powers\",\"type\":\"uint32[]\"},{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"}],\"internalType\":\"structOGPUBridge.Valset\",\"name\":\"next\",\"type\":\"tuple\"},{\"components\":[{\"internalType\":\"uint8\",\"name\":\"v\",\"type\":\"uint8\"},{\"internalType\":\"bytes32\",\"name\":\"r\",\"type\":\"bytes32\"},{\"internalType\":\"bytes32\",\"name\":\"s\",\"type\":\"bytes32\"}],\"internalType\":\"structOGPUBridge.Sig[]\",\"name\":\"sigs\",\"type\":\"tuple[]\"}],\"name\":\"updateValset\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"valsetCheckpoint\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"valsetNonce\",\"outputs\":[{\"internalType\":\"uint64\",\"name\":\"\",\"type\":\"uint64\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"components\":[{\"internalType\":\"address[]\",\"name\":\"validators\",\"type\":\"address[]\"},{\"internalType\":\"uint32[]\",\"name\":\"powers\",\"type\":\"uint32[]\"},{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"}],\"internalType\":\"structOGPUBridge.Valset\",\"name\":\"current\",\"type\":\"tuple\"},{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"},{\"internalType\":\"address\",\"name\":\"to\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"},{\"components\":[{\"internalType\":\"uint8\",\"name\":\"v\",\"type\":\"uint8\"},{\"internalType\":\"bytes32\",\"name\":\"r\",\"type\":\"bytes32\"},{\"internalType\":\"bytes32\",\"name\":\"s\",\"type\":\"bytes32\"}],\"internalType\":\"structOGPUBridge.Sig[]\",\"name\":\"sigs\",\"type\":\"tuple[]\"}],\"name\":\"withdraw\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint64\",\"name\":\"nonce\",\"type\":\"uint64\"},{\"internalType\":\"address\",\"name\":\"to\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"}],\"name\":\"withdrawDigest\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"}]",
	ID:  "OGPUBridge",
	Bin: "0x610100604052348015610010575f5ffd5b5060405161207f38038061207f83398101604081905261002f916103bf565b6001600160a01b038416158061004c57506001600160a01b038116155b1561006a5760405163d92e233d60e01b815260040160405180910390fd5b6001600160a01b03848116608090815290821660e090815260c0858152604080516020818101869052600e60a0808401919091526d6f6770752d6272696467652d763160901b83860152468385015230606084015295820189905282518083039094018452930190528051910120908190526100e583610162565b6100ef8184610238565b5f819055604084810151600180546001600160401b0319166001600160401b03909216918217905585516020870151925191937fd5e17426eb8458fbf95fd0f077ff91f27dcec0f4a20fe43fbb63179544f8ab96936101509391929161056b565b60405180910390a25050505050610617565b80515180158061017757508160200151518114155b156101955760405163421079d960e11b815260040160405180910390fd5b5f805b82811015610232575f845f015182815181106101b6576101b661059f565b60200260200101519050826001600160a01b0316816001600160a01b03161115806102035750846020015182815181106101f2576101f261059f565b602002602001015163ffffffff165f145b15610228576040516306ed965b60e51b81526004810183905260240160405180910390fd5b9150600101610198565b50505050565b5f828260400151835f0151846020015160405160200161025b94939291906105b3565b60405160208183030381529060405280519060200120905092915050565b6001600160a01b038116811461028d575f5ffd5b50565b634e487b7160e01b5f52604160045260245ffd5b604051606081016001600160401b03811182821017156102c6576102c6610290565b60405290565b604051601f8201601f191681016001600160401b03811182821017156102f4576102f4610290565b604052919050565b5f6001600160401b0382111561031457610314610290565b5060051b60200190565b805161032981610279565b919050565b5f82601f83011261033d575f5ffd5b815161035061034b826102fc565b6102cc565b8082825260208201915060208360051b860101925085831115610371575f5ffd5b602085015b8381101561039f57805163ffffffff81168114610391575f5ffd5b835260209283019201610376565b5095945050505050565b80516001600160401b0381168114610329575f5ffd5b5f5f5f5f608085870312156103d2575f5ffd5b84516103dd81610279565b6020860151604087015191955093506001600160401b038111156103ff575f5ffd5b850160608188031215610410575f5ffd5b6104186102a4565b81516001600160401b0381111561042d575f5ffd5b8201601f8101891361043d575f5ffd5b805161044b61034b826102fc565b8082825260208201915060208360051b85010192508b83111561046c575f5ffd5b6020840193505b8284101561049757835161048681610279565b825260209384019390910190610473565b845250505060208201516001600160401b038111156104b4575f5ffd5b6104c08982850161032e565b6020830152506104d2604083016103a9565b604082015292506104e790506060860161031e565b905092959194509250565b5f8151808452602084019350602083015f5b8281101561052b5781516001600160a01b0316865260209586019590910190600101610504565b5093949350505050565b5f8151808452602084019350602083015f5b8281101561052b57815163ffffffff16865260209586019590910190600101610547565b838152606060208201525f61058360608301856104f2565b82810360408401526105958185610535565b9695505050505050565b634e487b7160e01b5f52603260045260245ffd5b84815260a06020820152600a60a08201526918da1958dadc1bda5b9d60b21b60c082015260018060401b038416604082015260e060608201525f6105fa60e08301856104f2565b828103608084015261060c8185610535565b979650505050505050565b60805160a05160c05160e0516119ef6106905f395f818161016001526108d901525f6102b301525f818161028c015281816107b8015281816108a00152818161097c01528181610a0c0152610bdd01525f81816102da01528181610393015281816104130152818161045c015261068301526119ef5ff3fe608060405234801561000f575f5ffd5b5060043610610111575f3560e01c8063a869fb7a1161009e578063c0d3f6881161006e578063c0d3f68814610274578063c2fb26a614610287578063c8cf9b61146102ae578063fc0c546a146102d5578063fe18342d146102fc575f5ffd5b8063a869fb7a1461020d578063aaa8c76814610227578063b12a114114610249578063b661174a14610261575f5ffd5b80634876783f116100e45780634876783f146101ad5780635c975abb146101c25780636ec5e5dc146101df57806376a518df146101f25780638456cb5914610205575f5ffd5b806306110a761461011557806319b5e24714610130578063452a93201461015b57806347e7ef241461019a575b5f5ffd5b61011d5f5481565b6040519081526020015b60405180910390f35b600154610143906001600160401b031681565b6040516001600160401b039091168152602001610127565b6101827f000000000000000000000000000000000000000000000000000000000000000081565b6040516001600160a01b039091168152602001610127565b6101436101a8366004611228565b61030f565b6101c06101bb3660046112c3565b610581565b005b6003546101cf9060ff1681565b6040519015158152602001610127565b6101c06101ed366004611355565b6106ff565b61011d6102003660046113e3565b61089a565b6101c06108ce565b60015461014390600160401b90046001600160401b031681565b6101cf61023536600461141c565b60026020525f908152604090205460ff1681565b6003546101439061010090046001600160401b031681565b61011d61026f36600461143c565b610976565b61011d61028236600461141c565b610a09565b61011d7f000000000000000000000000000000000000000000000000000000000000000081565b61011d7f000000000000000000000000000000000000000000000000000000000000000081565b6101827f000000000000000000000000000000000000000000000000000000000000000081565b6101c061030a366004611476565b610a8b565b6003545f9060ff161561033557604051631309a56360e01b815260040160405180910390fd5b6001600160a01b03831661035c5760405163d92e233d60e01b815260040160405180910390fd5b815f0361037c57604051631f2a200560e01b815260040160405180910390fd5b6040516370a0823160e01b81523060048201525f907f00000000000000000000000000000000000000000000000000000000000000006001600160a01b0316906370a0823190602401602060405180830381865afa1580156103e0573d5f5f3e3d5ffd5b505050506040513d601f19601f8201168201806040525081019061040491906114d3565b905061043b6001600160a01b037f000000000000000000000000000000000000000000000000000000000000000016333086610b9b565b6040516370a0823160e01b81523060048201525f9082906001600160a01b037f000000000000000000000000000000000000000000000000000000000000000016906370a0823190602401602060405180830381865afa1580156104a1573d5f5f3e3d5ffd5b505050506040513d601f19601f820116820180604052508101906104c591906114d3565b6104cf91906114fe565b9050805f036104f157604051631f2a200560e01b815260040160405180910390fd5b6001805460089061051190600160401b90046001600160401b0316611511565b82546001600160401b038083166101009490940a84810291021990911617909255604080516001600160a01b03891681526020810185905292955033927f3058c9982050baca4b61c4c19150229f108f491b297706a6e1d190eb8399a974910160405180910390a3505092915050565b60035460ff16156105a557604051631309a56360e01b815260040160405180910390fd5b6001600160a01b0384166105cc5760405163d92e233d60e01b815260040160405180910390fd5b825f036105ec57604051631f2a200560e01b815260040160405180910390fd5b6001600160401b0385165f9081526002602052604090205460ff161561063557604051632853702960e11b81526001600160401b03861660048201526024015b60405180910390fd5b61063e86610bd7565b6106548661064d878787610976565b8484610c39565b6001600160401b0385165f908152600260205260409020805460ff191660011790556106aa6001600160a01b037f0000000000000000000000000000000000000000000000000000000000000000168585610f2f565b836001600160a01b0316856001600160401b03167f0ff23c4cdc2733f56d8f04d7a351c4332a1cd3334287ed5b2e9c6a28da9d3533856040516106ef91815260200190565b60405180910390a3505050505050565b61070f606085016040860161141c565b61071a90600161153b565b6001600160401b0316610733606085016040860161141c565b6001600160401b03161461079857610751606084016040850161141c565b610761606086016040870161141c565b61076c90600161153b565b60405163e692aec160e01b81526001600160401b0392831660048201529116602482015260440161062c565b6107a96107a48461166c565b610f69565b6107b284610bd7565b5f6107e57f00000000000000000000000000000000000000000000000000000000000000006107e08661166c565b611035565b90506107f385828585610c39565b5f819055610807606085016040860161141c565b6001805467ffffffffffffffff19166001600160401b0392909216919091179055610838606085016040860161141c565b6001600160401b03167fd5e17426eb8458fbf95fd0f077ff91f27dcec0f4a20fe43fbb63179544f8ab968261086d8780611747565b61087a60208a018a611747565b60405161088b95949392919061178c565b60405180910390a25050505050565b5f6108c87f00000000000000000000000000000000000000000000000000000000000000006107e08461166c565b92915050565b336001600160a01b037f000000000000000000000000000000000000000000000000000000000000000016146109195760405163a252c15160e01b815233600482015260240161062c565b60035460ff161561093d57604051631309a56360e01b815260040160405180910390fd5b6003805460ff1916600117905560405133907f62e78cea01bee320cd4e420270b5ea74000d11b0c9f74754ebdbfc544b05a258905f90a2565b604080517f0000000000000000000000000000000000000000000000000000000000000000602082015260a0918101829052600860c082015267776974686472617760c01b60e08201526001600160401b03851660608201526001600160a01b03841660808201529081018290525f90610100016040516020818303038152906040528051906020012090509392505050565b5f7f000000000000000000000000000000000000000000000000000000000000000082604051602001610a6e92919091825260606020830181905260079083015266756e706175736560c81b60808301526001600160401b0316604082015260a00190565b604051602081830303815290604052805190602001209050919050565b60035460ff16610aae57604051636cd6020160e01b815260040160405180910390fd5b600354610aca9061010090046001600160401b0316600161153b565b6001600160401b0316836001600160401b031614610b2c576003548390610b009061010090046001600160401b0316600161153b565b60405163097a283f60e01b81526001600160401b0392831660048201529116602482015260440161062c565b610b3584610bd7565b610b428461064d85610a09565b6003805468ffffffffffffffffff19166101006001600160401b03861690810260ff1916919091179091556040517fa0a1b115a3fdd20e32f15353aa316670a8888ae5f76ea442ef0b72527afa4962905f90a250505050565b610ba9848484846001611076565b610bd157604051635274afe760e01b81526001600160a01b038516600482015260240161062c565b50505050565b5f610c057f00000000000000000000000000000000000000000000000000000000000000006107e08461166c565b90505f548114610c35575f5460405163604b727960e01b815261062c918391600401918252602082015260400190565b5050565b5f610c448580611747565b915050818114610c71576040516313e6af8960e11b8152600481018390526024810182905260440161062c565b7f19457468657265756d205369676e6564204d6573736167653a0a3332000000005f908152601c859052603c81209080805b84811015610ee7575f610cb960208b018b611747565b83818110610cc957610cc9611821565b9050602002016020810190610cde9190611835565b63ffffffff169050610cf0818561184e565b93505f888884818110610d0557610d05611821565b610d1b9260206060909202019081019150611861565b905060ff8116158015610d4a5750888884818110610d3b57610d3b611821565b905060600201602001355f5f1b145b8015610d725750888884818110610d6357610d63611821565b905060600201604001355f5f1b145b15610d7e575050610edf565b601b8160ff161015610d9857610d95601b82611881565b90505b8060ff16601b14158015610db057508060ff16601c14155b15610e035782898985818110610dc857610dc8611821565b610dde9260206060909202019081019150611861565b60405163354bf40360e21b8152600481019290925260ff16602482015260440161062c565b5f5f610e4788848d8d89818110610e1c57610e1c611821565b905060600201602001358e8e8a818110610e3857610e38611821565b905060600201604001356110e3565b5090925090505f816003811115610e6057610e6061189a565b141580610ead5750610e728d80611747565b86818110610e8257610e82611821565b9050602002016020810190610e9791906118ae565b6001600160a01b0316826001600160a01b031614155b15610ece57604051630a57f30960e31b81526004810186905260240161062c565b610ed8848761184e565b9550505050505b600101610ca3565b50610ef38260026118c7565b610efe8260036118c7565b11610f255760405162bfb6ab60e01b8152600481018290526024810183905260440161062c565b5050505050505050565b610f3c83838360016111ab565b610f6457604051635274afe760e01b81526001600160a01b038416600482015260240161062c565b505050565b805151801580610f7e57508160200151518114155b15610f9c5760405163421079d960e11b815260040160405180910390fd5b5f805b82811015610bd1575f845f01518281518110610fbd57610fbd611821565b60200260200101519050826001600160a01b0316816001600160a01b031611158061100a575084602001518281518110610ff957610ff9611821565b602002602001015163ffffffff165f145b1561102b576040516306ed965b60e51b81526004810183905260240161062c565b9150600101610f9f565b5f828260400151835f01518460200151604051602001611058949392919061191e565b60405160208183030381529060405280519060200120905092915050565b6040516323b872dd60e01b5f8181526001600160a01b038781166004528616602452604485905291602083606481808c5af1925060015f511483166110d25783831516156110c6573d5f823e3d81fd5b5f883b113d1516831692505b604052505f60605295945050505050565b5f80807f7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a084111561111c57505f915060039050826111a1565b604080515f808252602082018084528a905260ff891692820192909252606081018790526080810186905260019060a0016020604051602081039080840390855afa15801561116d573d5f5f3e3d5ffd5b5050604051601f1901519150506001600160a01b03811661119857505f9250600191508290506111a1565b92505f91508190505b9450945094915050565b60405163a9059cbb60e01b5f8181526001600160a01b038616600452602485905291602083604481808b5af1925060015f511483166112015783831516156111f5573d5f823e3d81fd5b5f873b113d1516831692505b60405250949350505050565b80356001600160a01b0381168114611223575f5ffd5b919050565b5f5f60408385031215611239575f5ffd5b6112428361120d565b946020939093013593505050565b5f60608284031215611260575f5ffd5b50919050565b80356001600160401b0381168114611223575f5ffd5b5f5f83601f84011261128c575f5ffd5b5081356001600160401b038111156112a2575f5ffd5b6020830191508360206060830285010111156112bc575f5ffd5b9250929050565b5f5f5f5f5f5f60a087890312156112d8575f5ffd5b86356001600160401b038111156112ed575f5ffd5b6112f989828a01611250565b96505061130860208801611266565b94506113166040880161120d565b93506060870135925060808701356001600160401b03811115611337575f5ffd5b61134389828a0161127c565b979a9699509497509295939492505050565b5f5f5f5f60608587031215611368575f5ffd5b84356001600160401b0381111561137d575f5ffd5b61138987828801611250565b94505060208501356001600160401b038111156113a4575f5ffd5b6113b087828801611250565b93505060408501356001600160401b038111156113cb575f5ffd5b6113d78782880161127c565b95989497509550505050565b5f602082840312156113f3575f5ffd5b81356001600160401b03811115611408575f5ffd5b61141484828501611250565b949350505050565b5f6020828403121561142c575f5ffd5b61143582611266565b9392505050565b5f5f5f6060848603121561144e575f5ffd5b61145784611266565b92506114656020850161120d565b929592945050506040919091013590565b5f5f5f5f60608587031215611489575f5ffd5b84356001600160401b0381111561149e575f5ffd5b6114aa87828801611250565b9450506114b960208601611266565b925060408501356001600160401b038111156113cb575f5ffd5b5f602082840312156114e3575f5ffd5b5051919050565b634e487b7160e01b5f52601160045260245ffd5b818103818111156108c8576108c86114ea565b5f6001600160401b0382166001600160401b038103611532576115326114ea565b60010192915050565b6001600160401b0381811683821601908111156108c8576108c86114ea565b634e487b7160e01b5f52604160045260245ffd5b604051606081016001600160401b03811182821017156115905761159061155a565b60405290565b604051601f8201601f191681016001600160401b03811182821017156115be576115be61155a565b604052919050565b5f6001600160401b038211156115de576115de61155a565b5060051b60200190565b803563ffffffff81168114611223575f5ffd5b5f82601f83011261160a575f5ffd5b813561161d611618826115c6565b611596565b8082825260208201915060208360051b86010192508583111561163e575f5ffd5b602085015b8381101561166257611654816115e8565b835260209283019201611643565b5095945050505050565b5f6060823603121561167c575f5ffd5b61168461156e565b82356001600160401b03811115611699575f5ffd5b830136601f8201126116a9575f5ffd5b80356116b7611618826115c6565b8082825260208201915060208360051b8501019250368311156116d8575f5ffd5b6020840193505b82841015611701576116f08461120d565b8252602093840193909101906116df565b845250505060208301356001600160401b0381111561171e575f5ffd5b61172a368286016115fb565b60208301525061173c60408401611266565b604082015292915050565b5f5f8335601e1984360301811261175c575f5ffd5b8301803591506001600160401b03821115611775575f5ffd5b6020019150600581901b36038213156112bc575f5ffd5b85815260606020820181905281018490525f8560808301825b878110156117d3576001600160a01b036117be8461120d565b168252602092830192909101906001016117a5565b5083810360408501528481526020019050845f5b858110156118135763ffffffff6117fd836115e8565b16835260209283019291909101906001016117e7565b509098975050505050505050565b634e487b7160e01b5f52603260045260245ffd5b5f60208284031215611845575f5ffd5b611435826115e8565b808201808211156108c8576108c86114ea565b5f60208284031215611871575f5ffd5b813560ff81168114611435575f5ffd5b60ff81811683821601908111156108c8576108c86114ea565b634e487b7160e01b5f52602160045260245ffd5b5f602082840312156118be575f5ffd5b6114358261120d565b80820281158282048414176108c8576108c86114ea565b5f8151808452602084019350602083015f5b8281101561191457815163ffffffff168652602095860195909101906001016118f0565b5093949350505050565b84815260a06020820152600a60a08201526918da1958dadc1bda5b9d60b21b60c08201525f60e082016001600160401b038616604084015260e06060840152808551808352610100850191506020870192505f5b818110156119995783516001600160a01b0316835260209384019390920191600101611972565b505083810360808501526119ad81866118de565b9897505050505050505056fea26469706673582212209b0e03b69e7d55ae951139c0fdf2d6ed5f563b501a029ac5439b7892711a946e64736f6c63430008250033",
}

// OGPUBridge is an auto generated Go binding around an Ethereum contract.
type OGPUBridge struct {
	abi abi.ABI
}

// GetABI returns the ABI associated with this contract binding.
func (c *OGPUBridge) GetABI() abi.ABI {
	return c.abi
}

// NewOGPUBridge creates a new instance of OGPUBridge.
func NewOGPUBridge() *OGPUBridge {
	parsed, err := OGPUBridgeMetaData.ParseABI()
	if err != nil {
		panic(errors.New("invalid ABI: " + err.Error()))
	}
	return &OGPUBridge{abi: *parsed}
}

// Instance creates a wrapper for a deployed contract instance at the given address.
// Use this to create the instance object passed to abigen v2 library functions Call, Transact, etc.
func (c *OGPUBridge) Instance(backend bind.ContractBackend, addr common.Address) *bind.BoundContract {
	return bind.NewBoundContract(addr, c.abi, backend, backend, backend)
}

// PackConstructor is the Go binding used to pack the parameters required for
// contract deployment.
//
// Solidity: constructor(address token_, bytes32 appChainIdHash_, (address[],uint32[],uint64) initial, address guardian_) returns()
func (oGPUBridge *OGPUBridge) PackConstructor(token_ common.Address, appChainIdHash_ [32]byte, initial OGPUBridgeValset, guardian_ common.Address) []byte {
	enc, err := oGPUBridge.abi.Pack("", token_, appChainIdHash_, initial, guardian_)
	if err != nil {
		panic(err)
	}
	return enc
}

// PackAppChainIdHash is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xc8cf9b61.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function appChainIdHash() view returns(bytes32)
func (oGPUBridge *OGPUBridge) PackAppChainIdHash() []byte {
	enc, err := oGPUBridge.abi.Pack("appChainIdHash")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackAppChainIdHash is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xc8cf9b61.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function appChainIdHash() view returns(bytes32)
func (oGPUBridge *OGPUBridge) TryPackAppChainIdHash() ([]byte, error) {
	return oGPUBridge.abi.Pack("appChainIdHash")
}

// UnpackAppChainIdHash is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xc8cf9b61.
//
// Solidity: function appChainIdHash() view returns(bytes32)
func (oGPUBridge *OGPUBridge) UnpackAppChainIdHash(data []byte) ([32]byte, error) {
	out, err := oGPUBridge.abi.Unpack("appChainIdHash", data)
	if err != nil {
		return *new([32]byte), err
	}
	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)
	return out0, nil
}

// PackCheckpoint is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x76a518df.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function checkpoint((address[],uint32[],uint64) vs) view returns(bytes32)
func (oGPUBridge *OGPUBridge) PackCheckpoint(vs OGPUBridgeValset) []byte {
	enc, err := oGPUBridge.abi.Pack("checkpoint", vs)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackCheckpoint is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x76a518df.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function checkpoint((address[],uint32[],uint64) vs) view returns(bytes32)
func (oGPUBridge *OGPUBridge) TryPackCheckpoint(vs OGPUBridgeValset) ([]byte, error) {
	return oGPUBridge.abi.Pack("checkpoint", vs)
}

// UnpackCheckpoint is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x76a518df.
//
// Solidity: function checkpoint((address[],uint32[],uint64) vs) view returns(bytes32)
func (oGPUBridge *OGPUBridge) UnpackCheckpoint(data []byte) ([32]byte, error) {
	out, err := oGPUBridge.abi.Unpack("checkpoint", data)
	if err != nil {
		return *new([32]byte), err
	}
	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)
	return out0, nil
}

// PackDeposit is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x47e7ef24.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function deposit(address recipient, uint256 amount) returns(uint64 nonce)
func (oGPUBridge *OGPUBridge) PackDeposit(recipient common.Address, amount *big.Int) []byte {
	enc, err := oGPUBridge.abi.Pack("deposit", recipient, amount)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackDeposit is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x47e7ef24.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function deposit(address recipient, uint256 amount) returns(uint64 nonce)
func (oGPUBridge *OGPUBridge) TryPackDeposit(recipient common.Address, amount *big.Int) ([]byte, error) {
	return oGPUBridge.abi.Pack("deposit", recipient, amount)
}

// UnpackDeposit is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x47e7ef24.
//
// Solidity: function deposit(address recipient, uint256 amount) returns(uint64 nonce)
func (oGPUBridge *OGPUBridge) UnpackDeposit(data []byte) (uint64, error) {
	out, err := oGPUBridge.abi.Unpack("deposit", data)
	if err != nil {
		return *new(uint64), err
	}
	out0 := *abi.ConvertType(out[0], new(uint64)).(*uint64)
	return out0, nil
}

// PackDomain is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xc2fb26a6.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function domain() view returns(bytes32)
func (oGPUBridge *OGPUBridge) PackDomain() []byte {
	enc, err := oGPUBridge.abi.Pack("domain")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackDomain is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xc2fb26a6.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function domain() view returns(bytes32)
func (oGPUBridge *OGPUBridge) TryPackDomain() ([]byte, error) {
	return oGPUBridge.abi.Pack("domain")
}

// UnpackDomain is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xc2fb26a6.
//
// Solidity: function domain() view returns(bytes32)
func (oGPUBridge *OGPUBridge) UnpackDomain(data []byte) ([32]byte, error) {
	out, err := oGPUBridge.abi.Unpack("domain", data)
	if err != nil {
		return *new([32]byte), err
	}
	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)
	return out0, nil
}

// PackExecuted is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xaaa8c768.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function executed(uint64 ) view returns(bool)
func (oGPUBridge *OGPUBridge) PackExecuted(arg0 uint64) []byte {
	enc, err := oGPUBridge.abi.Pack("executed", arg0)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackExecuted is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xaaa8c768.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function executed(uint64 ) view returns(bool)
func (oGPUBridge *OGPUBridge) TryPackExecuted(arg0 uint64) ([]byte, error) {
	return oGPUBridge.abi.Pack("executed", arg0)
}

// UnpackExecuted is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xaaa8c768.
//
// Solidity: function executed(uint64 ) view returns(bool)
func (oGPUBridge *OGPUBridge) UnpackExecuted(data []byte) (bool, error) {
	out, err := oGPUBridge.abi.Unpack("executed", data)
	if err != nil {
		return *new(bool), err
	}
	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)
	return out0, nil
}

// PackGuardian is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x452a9320.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function guardian() view returns(address)
func (oGPUBridge *OGPUBridge) PackGuardian() []byte {
	enc, err := oGPUBridge.abi.Pack("guardian")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackGuardian is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x452a9320.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function guardian() view returns(address)
func (oGPUBridge *OGPUBridge) TryPackGuardian() ([]byte, error) {
	return oGPUBridge.abi.Pack("guardian")
}

// UnpackGuardian is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x452a9320.
//
// Solidity: function guardian() view returns(address)
func (oGPUBridge *OGPUBridge) UnpackGuardian(data []byte) (common.Address, error) {
	out, err := oGPUBridge.abi.Unpack("guardian", data)
	if err != nil {
		return *new(common.Address), err
	}
	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)
	return out0, nil
}

// PackLastDepositNonce is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xa869fb7a.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function lastDepositNonce() view returns(uint64)
func (oGPUBridge *OGPUBridge) PackLastDepositNonce() []byte {
	enc, err := oGPUBridge.abi.Pack("lastDepositNonce")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackLastDepositNonce is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xa869fb7a.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function lastDepositNonce() view returns(uint64)
func (oGPUBridge *OGPUBridge) TryPackLastDepositNonce() ([]byte, error) {
	return oGPUBridge.abi.Pack("lastDepositNonce")
}

// UnpackLastDepositNonce is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xa869fb7a.
//
// Solidity: function lastDepositNonce() view returns(uint64)
func (oGPUBridge *OGPUBridge) UnpackLastDepositNonce(data []byte) (uint64, error) {
	out, err := oGPUBridge.abi.Unpack("lastDepositNonce", data)
	if err != nil {
		return *new(uint64), err
	}
	out0 := *abi.ConvertType(out[0], new(uint64)).(*uint64)
	return out0, nil
}

// PackLastUnpauseNonce is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xb12a1141.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function lastUnpauseNonce() view returns(uint64)
func (oGPUBridge *OGPUBridge) PackLastUnpauseNonce() []byte {
	enc, err := oGPUBridge.abi.Pack("lastUnpauseNonce")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackLastUnpauseNonce is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xb12a1141.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function lastUnpauseNonce() view returns(uint64)
func (oGPUBridge *OGPUBridge) TryPackLastUnpauseNonce() ([]byte, error) {
	return oGPUBridge.abi.Pack("lastUnpauseNonce")
}

// UnpackLastUnpauseNonce is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xb12a1141.
//
// Solidity: function lastUnpauseNonce() view returns(uint64)
func (oGPUBridge *OGPUBridge) UnpackLastUnpauseNonce(data []byte) (uint64, error) {
	out, err := oGPUBridge.abi.Unpack("lastUnpauseNonce", data)
	if err != nil {
		return *new(uint64), err
	}
	out0 := *abi.ConvertType(out[0], new(uint64)).(*uint64)
	return out0, nil
}

// PackPause is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8456cb59.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function pause() returns()
func (oGPUBridge *OGPUBridge) PackPause() []byte {
	enc, err := oGPUBridge.abi.Pack("pause")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPause is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8456cb59.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function pause() returns()
func (oGPUBridge *OGPUBridge) TryPackPause() ([]byte, error) {
	return oGPUBridge.abi.Pack("pause")
}

// PackPaused is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x5c975abb.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function paused() view returns(bool)
func (oGPUBridge *OGPUBridge) PackPaused() []byte {
	enc, err := oGPUBridge.abi.Pack("paused")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPaused is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x5c975abb.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function paused() view returns(bool)
func (oGPUBridge *OGPUBridge) TryPackPaused() ([]byte, error) {
	return oGPUBridge.abi.Pack("paused")
}

// UnpackPaused is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x5c975abb.
//
// Solidity: function paused() view returns(bool)
func (oGPUBridge *OGPUBridge) UnpackPaused(data []byte) (bool, error) {
	out, err := oGPUBridge.abi.Unpack("paused", data)
	if err != nil {
		return *new(bool), err
	}
	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)
	return out0, nil
}

// PackToken is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xfc0c546a.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function token() view returns(address)
func (oGPUBridge *OGPUBridge) PackToken() []byte {
	enc, err := oGPUBridge.abi.Pack("token")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackToken is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xfc0c546a.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function token() view returns(address)
func (oGPUBridge *OGPUBridge) TryPackToken() ([]byte, error) {
	return oGPUBridge.abi.Pack("token")
}

// UnpackToken is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (oGPUBridge *OGPUBridge) UnpackToken(data []byte) (common.Address, error) {
	out, err := oGPUBridge.abi.Unpack("token", data)
	if err != nil {
		return *new(common.Address), err
	}
	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)
	return out0, nil
}

// PackUnpause is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xfe18342d.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function unpause((address[],uint32[],uint64) current, uint64 nonce, (uint8,bytes32,bytes32)[] sigs) returns()
func (oGPUBridge *OGPUBridge) PackUnpause(current OGPUBridgeValset, nonce uint64, sigs []OGPUBridgeSig) []byte {
	enc, err := oGPUBridge.abi.Pack("unpause", current, nonce, sigs)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackUnpause is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xfe18342d.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function unpause((address[],uint32[],uint64) current, uint64 nonce, (uint8,bytes32,bytes32)[] sigs) returns()
func (oGPUBridge *OGPUBridge) TryPackUnpause(current OGPUBridgeValset, nonce uint64, sigs []OGPUBridgeSig) ([]byte, error) {
	return oGPUBridge.abi.Pack("unpause", current, nonce, sigs)
}

// PackUnpauseDigest is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xc0d3f688.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function unpauseDigest(uint64 nonce) view returns(bytes32)
func (oGPUBridge *OGPUBridge) PackUnpauseDigest(nonce uint64) []byte {
	enc, err := oGPUBridge.abi.Pack("unpauseDigest", nonce)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackUnpauseDigest is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xc0d3f688.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function unpauseDigest(uint64 nonce) view returns(bytes32)
func (oGPUBridge *OGPUBridge) TryPackUnpauseDigest(nonce uint64) ([]byte, error) {
	return oGPUBridge.abi.Pack("unpauseDigest", nonce)
}

// UnpackUnpauseDigest is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xc0d3f688.
//
// Solidity: function unpauseDigest(uint64 nonce) view returns(bytes32)
func (oGPUBridge *OGPUBridge) UnpackUnpauseDigest(data []byte) ([32]byte, error) {
	out, err := oGPUBridge.abi.Unpack("unpauseDigest", data)
	if err != nil {
		return *new([32]byte), err
	}
	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)
	return out0, nil
}

// PackUpdateValset is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x6ec5e5dc.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function updateValset((address[],uint32[],uint64) current, (address[],uint32[],uint64) next, (uint8,bytes32,bytes32)[] sigs) returns()
func (oGPUBridge *OGPUBridge) PackUpdateValset(current OGPUBridgeValset, next OGPUBridgeValset, sigs []OGPUBridgeSig) []byte {
	enc, err := oGPUBridge.abi.Pack("updateValset", current, next, sigs)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackUpdateValset is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x6ec5e5dc.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function updateValset((address[],uint32[],uint64) current, (address[],uint32[],uint64) next, (uint8,bytes32,bytes32)[] sigs) returns()
func (oGPUBridge *OGPUBridge) TryPackUpdateValset(current OGPUBridgeValset, next OGPUBridgeValset, sigs []OGPUBridgeSig) ([]byte, error) {
	return oGPUBridge.abi.Pack("updateValset", current, next, sigs)
}

// PackValsetCheckpoint is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x06110a76.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function valsetCheckpoint() view returns(bytes32)
func (oGPUBridge *OGPUBridge) PackValsetCheckpoint() []byte {
	enc, err := oGPUBridge.abi.Pack("valsetCheckpoint")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackValsetCheckpoint is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x06110a76.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function valsetCheckpoint() view returns(bytes32)
func (oGPUBridge *OGPUBridge) TryPackValsetCheckpoint() ([]byte, error) {
	return oGPUBridge.abi.Pack("valsetCheckpoint")
}

// UnpackValsetCheckpoint is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x06110a76.
//
// Solidity: function valsetCheckpoint() view returns(bytes32)
func (oGPUBridge *OGPUBridge) UnpackValsetCheckpoint(data []byte) ([32]byte, error) {
	out, err := oGPUBridge.abi.Unpack("valsetCheckpoint", data)
	if err != nil {
		return *new([32]byte), err
	}
	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)
	return out0, nil
}

// PackValsetNonce is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x19b5e247.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function valsetNonce() view returns(uint64)
func (oGPUBridge *OGPUBridge) PackValsetNonce() []byte {
	enc, err := oGPUBridge.abi.Pack("valsetNonce")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackValsetNonce is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x19b5e247.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function valsetNonce() view returns(uint64)
func (oGPUBridge *OGPUBridge) TryPackValsetNonce() ([]byte, error) {
	return oGPUBridge.abi.Pack("valsetNonce")
}

// UnpackValsetNonce is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x19b5e247.
//
// Solidity: function valsetNonce() view returns(uint64)
func (oGPUBridge *OGPUBridge) UnpackValsetNonce(data []byte) (uint64, error) {
	out, err := oGPUBridge.abi.Unpack("valsetNonce", data)
	if err != nil {
		return *new(uint64), err
	}
	out0 := *abi.ConvertType(out[0], new(uint64)).(*uint64)
	return out0, nil
}

// PackWithdraw is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x4876783f.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function withdraw((address[],uint32[],uint64) current, uint64 nonce, address to, uint256 amount, (uint8,bytes32,bytes32)[] sigs) returns()
func (oGPUBridge *OGPUBridge) PackWithdraw(current OGPUBridgeValset, nonce uint64, to common.Address, amount *big.Int, sigs []OGPUBridgeSig) []byte {
	enc, err := oGPUBridge.abi.Pack("withdraw", current, nonce, to, amount, sigs)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackWithdraw is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x4876783f.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function withdraw((address[],uint32[],uint64) current, uint64 nonce, address to, uint256 amount, (uint8,bytes32,bytes32)[] sigs) returns()
func (oGPUBridge *OGPUBridge) TryPackWithdraw(current OGPUBridgeValset, nonce uint64, to common.Address, amount *big.Int, sigs []OGPUBridgeSig) ([]byte, error) {
	return oGPUBridge.abi.Pack("withdraw", current, nonce, to, amount, sigs)
}

// PackWithdrawDigest is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xb661174a.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function withdrawDigest(uint64 nonce, address to, uint256 amount) view returns(bytes32)
func (oGPUBridge *OGPUBridge) PackWithdrawDigest(nonce uint64, to common.Address, amount *big.Int) []byte {
	enc, err := oGPUBridge.abi.Pack("withdrawDigest", nonce, to, amount)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackWithdrawDigest is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xb661174a.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function withdrawDigest(uint64 nonce, address to, uint256 amount) view returns(bytes32)
func (oGPUBridge *OGPUBridge) TryPackWithdrawDigest(nonce uint64, to common.Address, amount *big.Int) ([]byte, error) {
	return oGPUBridge.abi.Pack("withdrawDigest", nonce, to, amount)
}

// UnpackWithdrawDigest is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xb661174a.
//
// Solidity: function withdrawDigest(uint64 nonce, address to, uint256 amount) view returns(bytes32)
func (oGPUBridge *OGPUBridge) UnpackWithdrawDigest(data []byte) ([32]byte, error) {
	out, err := oGPUBridge.abi.Unpack("withdrawDigest", data)
	if err != nil {
		return *new([32]byte), err
	}
	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)
	return out0, nil
}

// OGPUBridgeDeposited represents a Deposited event raised by the OGPUBridge contract.
type OGPUBridgeDeposited struct {
	Nonce     uint64
	From      common.Address
	Recipient common.Address
	Amount    *big.Int
	Raw       *types.Log // Blockchain specific contextual infos
}

const OGPUBridgeDepositedEventName = "Deposited"

// ContractEventName returns the user-defined event name.
func (OGPUBridgeDeposited) ContractEventName() string {
	return OGPUBridgeDepositedEventName
}

// UnpackDepositedEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event Deposited(uint64 indexed nonce, address indexed from, address recipient, uint256 amount)
func (oGPUBridge *OGPUBridge) UnpackDepositedEvent(log *types.Log) (*OGPUBridgeDeposited, error) {
	event := "Deposited"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUBridge.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUBridgeDeposited)
	if len(log.Data) > 0 {
		if err := oGPUBridge.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUBridge.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUBridgePaused represents a Paused event raised by the OGPUBridge contract.
type OGPUBridgePaused struct {
	Guardian common.Address
	Raw      *types.Log // Blockchain specific contextual infos
}

const OGPUBridgePausedEventName = "Paused"

// ContractEventName returns the user-defined event name.
func (OGPUBridgePaused) ContractEventName() string {
	return OGPUBridgePausedEventName
}

// UnpackPausedEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event Paused(address indexed guardian)
func (oGPUBridge *OGPUBridge) UnpackPausedEvent(log *types.Log) (*OGPUBridgePaused, error) {
	event := "Paused"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUBridge.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUBridgePaused)
	if len(log.Data) > 0 {
		if err := oGPUBridge.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUBridge.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUBridgeUnpaused represents a Unpaused event raised by the OGPUBridge contract.
type OGPUBridgeUnpaused struct {
	Nonce uint64
	Raw   *types.Log // Blockchain specific contextual infos
}

const OGPUBridgeUnpausedEventName = "Unpaused"

// ContractEventName returns the user-defined event name.
func (OGPUBridgeUnpaused) ContractEventName() string {
	return OGPUBridgeUnpausedEventName
}

// UnpackUnpausedEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event Unpaused(uint64 indexed nonce)
func (oGPUBridge *OGPUBridge) UnpackUnpausedEvent(log *types.Log) (*OGPUBridgeUnpaused, error) {
	event := "Unpaused"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUBridge.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUBridgeUnpaused)
	if len(log.Data) > 0 {
		if err := oGPUBridge.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUBridge.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUBridgeValsetUpdated represents a ValsetUpdated event raised by the OGPUBridge contract.
type OGPUBridgeValsetUpdated struct {
	Nonce      uint64
	Checkpoint [32]byte
	Validators []common.Address
	Powers     []uint32
	Raw        *types.Log // Blockchain specific contextual infos
}

const OGPUBridgeValsetUpdatedEventName = "ValsetUpdated"

// ContractEventName returns the user-defined event name.
func (OGPUBridgeValsetUpdated) ContractEventName() string {
	return OGPUBridgeValsetUpdatedEventName
}

// UnpackValsetUpdatedEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event ValsetUpdated(uint64 indexed nonce, bytes32 checkpoint, address[] validators, uint32[] powers)
func (oGPUBridge *OGPUBridge) UnpackValsetUpdatedEvent(log *types.Log) (*OGPUBridgeValsetUpdated, error) {
	event := "ValsetUpdated"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUBridge.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUBridgeValsetUpdated)
	if len(log.Data) > 0 {
		if err := oGPUBridge.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUBridge.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUBridgeWithdrawn represents a Withdrawn event raised by the OGPUBridge contract.
type OGPUBridgeWithdrawn struct {
	Nonce  uint64
	To     common.Address
	Amount *big.Int
	Raw    *types.Log // Blockchain specific contextual infos
}

const OGPUBridgeWithdrawnEventName = "Withdrawn"

// ContractEventName returns the user-defined event name.
func (OGPUBridgeWithdrawn) ContractEventName() string {
	return OGPUBridgeWithdrawnEventName
}

// UnpackWithdrawnEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event Withdrawn(uint64 indexed nonce, address indexed to, uint256 amount)
func (oGPUBridge *OGPUBridge) UnpackWithdrawnEvent(log *types.Log) (*OGPUBridgeWithdrawn, error) {
	event := "Withdrawn"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUBridge.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUBridgeWithdrawn)
	if len(log.Data) > 0 {
		if err := oGPUBridge.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUBridge.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// UnpackError attempts to decode the provided error data using user-defined
// error definitions.
func (oGPUBridge *OGPUBridge) UnpackError(raw []byte) (any, error) {
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["AlreadyExecuted"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackAlreadyExecutedError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["InsufficientPower"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackInsufficientPowerError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["InvalidSignature"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackInvalidSignatureError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["InvalidV"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackInvalidVError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["InvalidValidator"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackInvalidValidatorError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["IsPaused"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackIsPausedError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["MalformedValset"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackMalformedValsetError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["NotGuardian"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackNotGuardianError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["NotPaused"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackNotPausedError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["SafeERC20FailedOperation"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackSafeERC20FailedOperationError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["SignatureCount"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackSignatureCountError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["WrongCheckpoint"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackWrongCheckpointError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["WrongUnpauseNonce"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackWrongUnpauseNonceError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["WrongValsetNonce"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackWrongValsetNonceError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["ZeroAddress"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackZeroAddressError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUBridge.abi.Errors["ZeroAmount"].ID.Bytes()[:4]) {
		return oGPUBridge.UnpackZeroAmountError(raw[4:])
	}
	return nil, errors.New("Unknown error")
}

// OGPUBridgeAlreadyExecuted represents a AlreadyExecuted error raised by the OGPUBridge contract.
type OGPUBridgeAlreadyExecuted struct {
	Nonce uint64
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error AlreadyExecuted(uint64 nonce)
func OGPUBridgeAlreadyExecutedErrorID() common.Hash {
	return common.HexToHash("0x50a6e052a64ef0e0e359d483476796f10c9b2703975549b9462e11ea6db9cbdf")
}

// UnpackAlreadyExecutedError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error AlreadyExecuted(uint64 nonce)
func (oGPUBridge *OGPUBridge) UnpackAlreadyExecutedError(raw []byte) (*OGPUBridgeAlreadyExecuted, error) {
	out := new(OGPUBridgeAlreadyExecuted)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "AlreadyExecuted", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeInsufficientPower represents a InsufficientPower error raised by the OGPUBridge contract.
type OGPUBridgeInsufficientPower struct {
	Signed *big.Int
	Total  *big.Int
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error InsufficientPower(uint256 signed, uint256 total)
func OGPUBridgeInsufficientPowerErrorID() common.Hash {
	return common.HexToHash("0x00bfb6abc91300e23f23fef9f8adbfb149cb9bb556ab8e6efed6c3856e12d198")
}

// UnpackInsufficientPowerError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error InsufficientPower(uint256 signed, uint256 total)
func (oGPUBridge *OGPUBridge) UnpackInsufficientPowerError(raw []byte) (*OGPUBridgeInsufficientPower, error) {
	out := new(OGPUBridgeInsufficientPower)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "InsufficientPower", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeInvalidSignature represents a InvalidSignature error raised by the OGPUBridge contract.
type OGPUBridgeInvalidSignature struct {
	Index *big.Int
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error InvalidSignature(uint256 index)
func OGPUBridgeInvalidSignatureErrorID() common.Hash {
	return common.HexToHash("0x52bf9848f4f569cd5e845a26f8524878f8ac004dcaace7433d78683624c84a76")
}

// UnpackInvalidSignatureError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error InvalidSignature(uint256 index)
func (oGPUBridge *OGPUBridge) UnpackInvalidSignatureError(raw []byte) (*OGPUBridgeInvalidSignature, error) {
	out := new(OGPUBridgeInvalidSignature)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "InvalidSignature", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeInvalidV represents a InvalidV error raised by the OGPUBridge contract.
type OGPUBridgeInvalidV struct {
	Index *big.Int
	V     uint8
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error InvalidV(uint256 index, uint8 v)
func OGPUBridgeInvalidVErrorID() common.Hash {
	return common.HexToHash("0xd52fd00c7e3785d60ea7c2691f11a16351bf710a51c1900de31cbf7cf9b74b63")
}

// UnpackInvalidVError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error InvalidV(uint256 index, uint8 v)
func (oGPUBridge *OGPUBridge) UnpackInvalidVError(raw []byte) (*OGPUBridgeInvalidV, error) {
	out := new(OGPUBridgeInvalidV)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "InvalidV", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeInvalidValidator represents a InvalidValidator error raised by the OGPUBridge contract.
type OGPUBridgeInvalidValidator struct {
	Index *big.Int
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error InvalidValidator(uint256 index)
func OGPUBridgeInvalidValidatorErrorID() common.Hash {
	return common.HexToHash("0xddb2cb601bacc3767ae05100627384ecbdb4ed4716edf66ed3fca946dc60f9f2")
}

// UnpackInvalidValidatorError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error InvalidValidator(uint256 index)
func (oGPUBridge *OGPUBridge) UnpackInvalidValidatorError(raw []byte) (*OGPUBridgeInvalidValidator, error) {
	out := new(OGPUBridgeInvalidValidator)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "InvalidValidator", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeIsPaused represents a IsPaused error raised by the OGPUBridge contract.
type OGPUBridgeIsPaused struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error IsPaused()
func OGPUBridgeIsPausedErrorID() common.Hash {
	return common.HexToHash("0x1309a5639731e6b91c4aa19095f23eee07602ba240a393e2b5ccbf71a8e2952f")
}

// UnpackIsPausedError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error IsPaused()
func (oGPUBridge *OGPUBridge) UnpackIsPausedError(raw []byte) (*OGPUBridgeIsPaused, error) {
	out := new(OGPUBridgeIsPaused)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "IsPaused", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeMalformedValset represents a MalformedValset error raised by the OGPUBridge contract.
type OGPUBridgeMalformedValset struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error MalformedValset()
func OGPUBridgeMalformedValsetErrorID() common.Hash {
	return common.HexToHash("0x8420f3b2e4f6e933d4f83d33e230061d6cca2908c0efd524993a7472e0f9d97d")
}

// UnpackMalformedValsetError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error MalformedValset()
func (oGPUBridge *OGPUBridge) UnpackMalformedValsetError(raw []byte) (*OGPUBridgeMalformedValset, error) {
	out := new(OGPUBridgeMalformedValset)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "MalformedValset", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeNotGuardian represents a NotGuardian error raised by the OGPUBridge contract.
type OGPUBridgeNotGuardian struct {
	Caller common.Address
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error NotGuardian(address caller)
func OGPUBridgeNotGuardianErrorID() common.Hash {
	return common.HexToHash("0xa252c151cd1ee155ad6a596fd962f839a8b963fd05f5e863eca095de2e0b08a4")
}

// UnpackNotGuardianError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error NotGuardian(address caller)
func (oGPUBridge *OGPUBridge) UnpackNotGuardianError(raw []byte) (*OGPUBridgeNotGuardian, error) {
	out := new(OGPUBridgeNotGuardian)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "NotGuardian", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeNotPaused represents a NotPaused error raised by the OGPUBridge contract.
type OGPUBridgeNotPaused struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error NotPaused()
func OGPUBridgeNotPausedErrorID() common.Hash {
	return common.HexToHash("0x6cd602013233635730773e15e89b8a778034d859147e8f706bcd1aa42e228e06")
}

// UnpackNotPausedError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error NotPaused()
func (oGPUBridge *OGPUBridge) UnpackNotPausedError(raw []byte) (*OGPUBridgeNotPaused, error) {
	out := new(OGPUBridgeNotPaused)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "NotPaused", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeSafeERC20FailedOperation represents a SafeERC20FailedOperation error raised by the OGPUBridge contract.
type OGPUBridgeSafeERC20FailedOperation struct {
	Token common.Address
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error SafeERC20FailedOperation(address token)
func OGPUBridgeSafeERC20FailedOperationErrorID() common.Hash {
	return common.HexToHash("0x5274afe73c98b4749fc91ffae6b7b574e7842cb2144a159e9377a5f20b32edf9")
}

// UnpackSafeERC20FailedOperationError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error SafeERC20FailedOperation(address token)
func (oGPUBridge *OGPUBridge) UnpackSafeERC20FailedOperationError(raw []byte) (*OGPUBridgeSafeERC20FailedOperation, error) {
	out := new(OGPUBridgeSafeERC20FailedOperation)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "SafeERC20FailedOperation", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeSignatureCount represents a SignatureCount error raised by the OGPUBridge contract.
type OGPUBridgeSignatureCount struct {
	Given *big.Int
	Want  *big.Int
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error SignatureCount(uint256 given, uint256 want)
func OGPUBridgeSignatureCountErrorID() common.Hash {
	return common.HexToHash("0x27cd5f1227f7d030b067f23d940162f61941aa88011ade13140b695988f26f7a")
}

// UnpackSignatureCountError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error SignatureCount(uint256 given, uint256 want)
func (oGPUBridge *OGPUBridge) UnpackSignatureCountError(raw []byte) (*OGPUBridgeSignatureCount, error) {
	out := new(OGPUBridgeSignatureCount)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "SignatureCount", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeWrongCheckpoint represents a WrongCheckpoint error raised by the OGPUBridge contract.
type OGPUBridgeWrongCheckpoint struct {
	Given  [32]byte
	Stored [32]byte
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error WrongCheckpoint(bytes32 given, bytes32 stored)
func OGPUBridgeWrongCheckpointErrorID() common.Hash {
	return common.HexToHash("0x604b7279622639702a487862605483bdae971b74cb0dc6831f91f0a4dd85bb8a")
}

// UnpackWrongCheckpointError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error WrongCheckpoint(bytes32 given, bytes32 stored)
func (oGPUBridge *OGPUBridge) UnpackWrongCheckpointError(raw []byte) (*OGPUBridgeWrongCheckpoint, error) {
	out := new(OGPUBridgeWrongCheckpoint)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "WrongCheckpoint", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeWrongUnpauseNonce represents a WrongUnpauseNonce error raised by the OGPUBridge contract.
type OGPUBridgeWrongUnpauseNonce struct {
	Given uint64
	Want  uint64
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error WrongUnpauseNonce(uint64 given, uint64 want)
func OGPUBridgeWrongUnpauseNonceErrorID() common.Hash {
	return common.HexToHash("0x097a283fc5f6fd643e4d32197e99f64ee5c2b99aae5123aa5422b0b2c96cff39")
}

// UnpackWrongUnpauseNonceError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error WrongUnpauseNonce(uint64 given, uint64 want)
func (oGPUBridge *OGPUBridge) UnpackWrongUnpauseNonceError(raw []byte) (*OGPUBridgeWrongUnpauseNonce, error) {
	out := new(OGPUBridgeWrongUnpauseNonce)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "WrongUnpauseNonce", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeWrongValsetNonce represents a WrongValsetNonce error raised by the OGPUBridge contract.
type OGPUBridgeWrongValsetNonce struct {
	Given uint64
	Want  uint64
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error WrongValsetNonce(uint64 given, uint64 want)
func OGPUBridgeWrongValsetNonceErrorID() common.Hash {
	return common.HexToHash("0xe692aec18c3625977fc8e859e0d9e24542089384cdb130dc18a0ecd1b39caad8")
}

// UnpackWrongValsetNonceError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error WrongValsetNonce(uint64 given, uint64 want)
func (oGPUBridge *OGPUBridge) UnpackWrongValsetNonceError(raw []byte) (*OGPUBridgeWrongValsetNonce, error) {
	out := new(OGPUBridgeWrongValsetNonce)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "WrongValsetNonce", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeZeroAddress represents a ZeroAddress error raised by the OGPUBridge contract.
type OGPUBridgeZeroAddress struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ZeroAddress()
func OGPUBridgeZeroAddressErrorID() common.Hash {
	return common.HexToHash("0xd92e233df2717d4a40030e20904abd27b68fcbeede117eaaccbbdac9618c8c73")
}

// UnpackZeroAddressError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ZeroAddress()
func (oGPUBridge *OGPUBridge) UnpackZeroAddressError(raw []byte) (*OGPUBridgeZeroAddress, error) {
	out := new(OGPUBridgeZeroAddress)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "ZeroAddress", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUBridgeZeroAmount represents a ZeroAmount error raised by the OGPUBridge contract.
type OGPUBridgeZeroAmount struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ZeroAmount()
func OGPUBridgeZeroAmountErrorID() common.Hash {
	return common.HexToHash("0x1f2a2005cb66a8e145327e8814e243a0996aec9bfe1e15a495778b1236dbd485")
}

// UnpackZeroAmountError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ZeroAmount()
func (oGPUBridge *OGPUBridge) UnpackZeroAmountError(raw []byte) (*OGPUBridgeZeroAmount, error) {
	out := new(OGPUBridgeZeroAmount)
	if err := oGPUBridge.abi.UnpackIntoInterface(out, "ZeroAmount", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenMetaData contains all meta data concerning the OGPUToken contract.
var OGPUTokenMetaData = bind.MetaData{
	ABI: "[{\"inputs\":[{\"internalType\":\"address\",\"name\":\"initialOwner\",\"type\":\"address\"},{\"internalType\":\"address\",\"name\":\"holder\",\"type\":\"address\"},{\"internalType\":\"address\",\"name\":\"treasury_\",\"type\":\"address\"}],\"stateMutability\":\"nonpayable\",\"type\":\"constructor\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"spender\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"allowance\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"needed\",\"type\":\"uint256\"}],\"name\":\"ERC20InsufficientAllowance\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"sender\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"balance\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"needed\",\"type\":\"uint256\"}],\"name\":\"ERC20InsufficientBalance\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"approver\",\"type\":\"address\"}],\"name\":\"ERC20InvalidApprover\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"receiver\",\"type\":\"address\"}],\"name\":\"ERC20InvalidReceiver\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"sender\",\"type\":\"address\"}],\"name\":\"ERC20InvalidSender\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"spender\",\"type\":\"address\"}],\"name\":\"ERC20InvalidSpender\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"owner\",\"type\":\"address\"}],\"name\":\"OwnableInvalidOwner\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"OwnableUnauthorizedAccount\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"currentBps\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"requestedBps\",\"type\":\"uint256\"}],\"name\":\"TaxCanOnlyGoDown\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"TaxIsRemovedForever\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"ZeroAddress\",\"type\":\"error\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"owner\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"spender\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"Approval\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"bool\",\"name\":\"isExempt\",\"type\":\"bool\"}],\"name\":\"ExemptSet\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"previousOwner\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"newOwner\",\"type\":\"address\"}],\"name\":\"OwnershipTransferStarted\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"previousOwner\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"newOwner\",\"type\":\"address\"}],\"name\":\"OwnershipTransferred\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"pair\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"bool\",\"name\":\"isPair\",\"type\":\"bool\"}],\"name\":\"PairSet\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"oldBps\",\"type\":\"uint256\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"newBps\",\"type\":\"uint256\"}],\"name\":\"TaxLowered\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[],\"name\":\"TaxRemovedForever\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"from\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"to\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"Transfer\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"oldTreasury\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"newTreasury\",\"type\":\"address\"}],\"name\":\"TreasurySet\",\"type\":\"event\"},{\"inputs\":[],\"name\":\"MAX_TAX_BPS\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"TOTAL_SUPPLY\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"acceptOwnership\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"owner\",\"type\":\"address\"},{\"internalType\":\"address\",\"name\":\"spender\",\"type\":\"address\"}],\"name\":\"allowance\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"spender\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"approve\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"balanceOf\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"decimals\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"name\":\"isExempt\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"name\":\"isPair\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"newBps\",\"type\":\"uint256\"}],\"name\":\"lowerTax\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"name\",\"outputs\":[{\"internalType\":\"string\",\"name\":\"\",\"type\":\"string\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"owner\",\"outputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"pendingOwner\",\"outputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"removeTaxForever\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"renounceOwnership\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"internalType\":\"bool\",\"name\":\"exempt\",\"type\":\"bool\"}],\"name\":\"setExempt\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"pair\",\"type\":\"address\"},{\"internalType\":\"bool\",\"name\":\"registered\",\"type\":\"bool\"}],\"name\":\"setPair\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"newTreasury\",\"type\":\"address\"}],\"name\":\"setTreasury\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"symbol\",\"outputs\":[{\"internalType\":\"string\",\"name\":\"\",\"type\":\"string\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"taxBps\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"taxRemovedForever\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"totalSupply\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"to\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"transfer\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"from\",\"type\":\"address\"},{\"internalType\":\"address\",\"name\":\"to\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"transferFrom\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"newOwner\",\"type\":\"address\"}],\"name\":\"transferOwnership\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"treasury\",\"outputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"}]",
	ID:  "OGPUToken",
	Bin: "0x608060405234801561000f575f5ffd5b506040516115fb3803806115fb83398101604081905261002e916104c5565b82604051806040016040528060048152602001636f47505560e01b815250604051806040016040528060048152602001634f47505560e01b815250816003908161007891906105a8565b50600461008582826105a8565b5050506001600160a01b0381166100b657604051631e4fbdf760e01b81525f60048201526024015b60405180910390fd5b6100bf8161015f565b506001600160a01b03821615806100dd57506001600160a01b038116155b156100fb5760405163d92e233d60e01b815260040160405180910390fd5b60088054610100600160a81b0319166101006001600160a01b038416021790556101f460075561012c83600161017b565b61013782600161017b565b61014281600161017b565b610157826a115eec47f6cf7e350000006101d9565b5050506106dc565b600680546001600160a01b031916905561017881610211565b50565b6001600160a01b0382165f818152600a6020908152604091829020805460ff191685151590811790915591519182527ff33950bf7aa3300efb48f7896f309484c287418977abeba9f08f12cbe451d36a910160405180910390a25050565b6001600160a01b0382166102025760405163ec442f0560e01b81525f60048201526024016100ad565b61020d5f8383610262565b5050565b600580546001600160a01b038381166001600160a01b0319831681179093556040519116919082907f8be0079c531659141344cd1fd0a4f28419497f9722a3daafe3b4186f6b6457e0905f90a35050565b600754801580159061027c57506001600160a01b03841615155b801561029057506001600160a01b03831615155b80156102d457506001600160a01b0384165f9081526009602052604090205460ff16806102d457506001600160a01b0383165f9081526009602052604090205460ff165b80156102f857506001600160a01b0384165f908152600a602052604090205460ff16155b801561031c57506001600160a01b0383165f908152600a602052604090205460ff16155b15610373575f61271061032f838561067a565b6103399190610697565b60085490915061035990869061010090046001600160a01b031683610384565b61036d858561036884876106b6565b610384565b5061037e565b61037e848484610384565b50505050565b6001600160a01b0383166103ae578060025f8282546103a391906106c9565b9091555061041e9050565b6001600160a01b0383165f90815260208190526040902054818110156104005760405163391434e360e21b81526001600160a01b038516600482015260248101829052604481018390526064016100ad565b6001600160a01b0384165f9081526020819052604090209082900390555b6001600160a01b03821661043a57600280548290039055610458565b6001600160a01b0382165f9081526020819052604090208054820190555b816001600160a01b0316836001600160a01b03167fddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef8360405161049d91815260200190565b60405180910390a3505050565b80516001600160a01b03811681146104c0575f5ffd5b919050565b5f5f5f606084860312156104d7575f5ffd5b6104e0846104aa565b92506104ee602085016104aa565b91506104fc604085016104aa565b90509250925092565b634e487b7160e01b5f52604160045260245ffd5b600181811c9082168061052d57607f821691505b60208210810361054b57634e487b7160e01b5f52602260045260245ffd5b50919050565b601f8211156105a357828211156105a357805f5260205f20601f840160051c602085101561057c57505f5b90810190601f840160051c035f5b8181101561059f575f8382015560010161058a565b5050505b505050565b81516001600160401b038111156105c1576105c1610505565b6105d5816105cf8454610519565b84610551565b6020601f821160018114610607575f83156105f05750848201515b5f19600385901b1c1916600184901b17845561065f565b5f84815260208120601f198516915b828110156106365787850151825560209485019460019092019101610616565b508482101561065357868401515f19600387901b60f8161c191681555b505060018360011b0184555b5050505050565b634e487b7160e01b5f52601160045260245ffd5b808202811582820484141761069157610691610666565b92915050565b5f826106b157634e487b7160e01b5f52601260045260245ffd5b500490565b8181038181111561069157610691610666565b8082018082111561069157610691610666565b610f12806106e95f395ff3fe608060405234801561000f575f5ffd5b5060043610610187575f3560e01c80638da5cb5b116100d9578063ad5dff7311610093578063e30c39781161006e578063e30c397814610362578063e5e31b1314610373578063f0f4426014610395578063f2fde38b146103a8575f5ffd5b8063ad5dff73146102fb578063d18384061461031d578063dd62ed3e1461032a575f5ffd5b80638da5cb5b14610297578063902d55a5146102a857806395d89b41146102ba5780639e752b95146102c25780639fde54f5146102d5578063a9059cbb146102e8575f5ffd5b8063313ce5671161014457806370a082311161011f57806370a082311461024c578063715018a61461027457806379ba50971461027c57806386a22eff14610284575f5ffd5b8063313ce567146102045780633eacd2f81461021357806361d027b31461021c575f5ffd5b806305d82c2c1461018b57806306fdde0314610195578063095ea7b3146101b357806318160ddd146101d657806323b872dd146101e85780632c597de9146101fb575b5f5ffd5b6101936103bb565b005b61019d610469565b6040516101aa9190610ce1565b60405180910390f35b6101c66101c1366004610d31565b6104f9565b60405190151581526020016101aa565b6002545b6040519081526020016101aa565b6101c66101f6366004610d59565b610512565b6101da6101f481565b604051601281526020016101aa565b6101da60075481565b6008546102349061010090046001600160a01b031681565b6040516001600160a01b0390911681526020016101aa565b6101da61025a366004610d93565b6001600160a01b03165f9081526020819052604090205490565b610193610535565b610193610548565b610193610292366004610db3565b610591565b6005546001600160a01b0316610234565b6101da6a115eec47f6cf7e3500000081565b61019d61061f565b6101936102d0366004610dec565b61062e565b6101936102e3366004610db3565b6106c9565b6101c66102f6366004610d31565b6106df565b6101c6610309366004610d93565b600a6020525f908152604090205460ff1681565b6008546101c69060ff1681565b6101da610338366004610e03565b6001600160a01b039182165f90815260016020908152604080832093909416825291909152205490565b6006546001600160a01b0316610234565b6101c6610381366004610d93565b60096020525f908152604090205460ff1681565b6101936103a3366004610d93565b6106ec565b6101936103b6366004610d93565b610781565b6103c36107f2565b60085460ff16156103e75760405163089ed8d960e01b815260040160405180910390fd5b600780545f918290556008805460ff1916600117905560405190917f6730125b30f7ce607ec131806ee745edfbbe74fd9254d58c511b19b16b0458499161043691848252602082015260400190565b60405180910390a16040517f1906a495be50eef8ee646fe337034bd61b3e3afbd1d35b303edc176b4c2fbb0c905f90a150565b60606003805461047890610e34565b80601f01602080910402602001604051908101604052809291908181526020018280546104a490610e34565b80156104ef5780601f106104c6576101008083540402835291602001916104ef565b820191905f5260205f20905b8154815290600101906020018083116104d257829003601f168201915b5050505050905090565b5f3361050681858561081f565b60019150505b92915050565b5f3361051f858285610831565b61052a8585856108ad565b506001949350505050565b61053d6107f2565b6105465f61090a565b565b60065433906001600160a01b031681146105855760405163118cdaa760e01b81526001600160a01b03821660048201526024015b60405180910390fd5b61058e8161090a565b50565b6105996107f2565b6001600160a01b0382166105c05760405163d92e233d60e01b815260040160405180910390fd5b6001600160a01b0382165f81815260096020908152604091829020805460ff191685151590811790915591519182527f3ce88d9221880ccac3da1d2b7bff84dc444bd01b3bb0d90da7826a6049f61ee591015b60405180910390a25050565b60606004805461047890610e34565b6106366107f2565b60085460ff161561065a5760405163089ed8d960e01b815260040160405180910390fd5b60075480821061068757604051631879553160e01b8152600481018290526024810183905260440161057c565b600782905560408051828152602081018490527f6730125b30f7ce607ec131806ee745edfbbe74fd9254d58c511b19b16b045849910160405180910390a15050565b6106d16107f2565b6106db8282610923565b5050565b5f336105068185856108ad565b6106f46107f2565b6001600160a01b03811661071b5760405163d92e233d60e01b815260040160405180910390fd5b6008546040516001600160a01b0380841692610100900416907f21eb548722a564f6e09f039f7aa858ae94c911910f3823b37af2250eeca4f403905f90a3600880546001600160a01b0390921661010002610100600160a81b0319909216919091179055565b6107896107f2565b600680546001600160a01b0383166001600160a01b031990911681179091556107ba6005546001600160a01b031690565b6001600160a01b03167f38d16b8cac22d99fc7c124b9cd0de2d3fa1faef420bfe791d8c362d765e2270060405160405180910390a350565b6005546001600160a01b031633146105465760405163118cdaa760e01b815233600482015260240161057c565b61082c838383600161097a565b505050565b6001600160a01b038381165f908152600160209081526040808320938616835292905220545f198110156108a7578181101561089957604051637dc7a0d960e11b81526001600160a01b0384166004820152602481018290526044810183905260640161057c565b6108a784848484035f61097a565b50505050565b6001600160a01b0383166108d657604051634b637e8f60e11b81525f600482015260240161057c565b6001600160a01b0382166108ff5760405163ec442f0560e01b81525f600482015260240161057c565b61082c838383610a4c565b600680546001600160a01b031916905561058e81610b6a565b6001600160a01b0382165f818152600a6020908152604091829020805460ff191685151590811790915591519182527ff33950bf7aa3300efb48f7896f309484c287418977abeba9f08f12cbe451d36a9101610613565b6001600160a01b0384166109a35760405163e602df0560e01b81525f600482015260240161057c565b6001600160a01b0383166109cc57604051634a1406b160e11b81525f600482015260240161057c565b6001600160a01b038085165f90815260016020908152604080832093871683529290522082905580156108a757826001600160a01b0316846001600160a01b03167f8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b92584604051610a3e91815260200190565b60405180910390a350505050565b6007548015801590610a6657506001600160a01b03841615155b8015610a7a57506001600160a01b03831615155b8015610abe57506001600160a01b0384165f9081526009602052604090205460ff1680610abe57506001600160a01b0383165f9081526009602052604090205460ff165b8015610ae257506001600160a01b0384165f908152600a602052604090205460ff16155b8015610b0657506001600160a01b0383165f908152600a602052604090205460ff16155b15610b5f575f612710610b198385610e80565b610b239190610e97565b9050610b4585600860019054906101000a90046001600160a01b031683610bbb565b610b598585610b548487610eb6565b610bbb565b506108a7565b6108a7848484610bbb565b600580546001600160a01b038381166001600160a01b0319831681179093556040519116919082907f8be0079c531659141344cd1fd0a4f28419497f9722a3daafe3b4186f6b6457e0905f90a35050565b6001600160a01b038316610be5578060025f828254610bda9190610ec9565b90915550610c559050565b6001600160a01b0383165f9081526020819052604090205481811015610c375760405163391434e360e21b81526001600160a01b0385166004820152602481018290526044810183905260640161057c565b6001600160a01b0384165f9081526020819052604090209082900390555b6001600160a01b038216610c7157600280548290039055610c8f565b6001600160a01b0382165f9081526020819052604090208054820190555b816001600160a01b0316836001600160a01b03167fddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef83604051610cd491815260200190565b60405180910390a3505050565b602081525f82518060208401528060208501604085015e5f604082850101526040601f19601f83011684010191505092915050565b80356001600160a01b0381168114610d2c575f5ffd5b919050565b5f5f60408385031215610d42575f5ffd5b610d4b83610d16565b946020939093013593505050565b5f5f5f60608486031215610d6b575f5ffd5b610d7484610d16565b9250610d8260208501610d16565b929592945050506040919091013590565b5f60208284031215610da3575f5ffd5b610dac82610d16565b9392505050565b5f5f60408385031215610dc4575f5ffd5b610dcd83610d16565b915060208301358015158114610de1575f5ffd5b809150509250929050565b5f60208284031215610dfc575f5ffd5b5035919050565b5f5f60408385031215610e14575f5ffd5b610e1d83610d16565b9150610e2b60208401610d16565b90509250929050565b600181811c90821680610e4857607f821691505b602082108103610e6657634e487b7160e01b5f52602260045260245ffd5b50919050565b634e487b7160e01b5f52601160045260245ffd5b808202811582820484141761050c5761050c610e6c565b5f82610eb157634e487b7160e01b5f52601260045260245ffd5b500490565b8181038181111561050c5761050c610e6c565b8082018082111561050c5761050c610e6c56fea264697066735822122026b96d5899cfba47156dc43327ac5e821230f55d3dc97c30f1503a58255037ff64736f6c63430008250033",
}

// OGPUToken is an auto generated Go binding around an Ethereum contract.
type OGPUToken struct {
	abi abi.ABI
}

// GetABI returns the ABI associated with this contract binding.
func (c *OGPUToken) GetABI() abi.ABI {
	return c.abi
}

// NewOGPUToken creates a new instance of OGPUToken.
func NewOGPUToken() *OGPUToken {
	parsed, err := OGPUTokenMetaData.ParseABI()
	if err != nil {
		panic(errors.New("invalid ABI: " + err.Error()))
	}
	return &OGPUToken{abi: *parsed}
}

// Instance creates a wrapper for a deployed contract instance at the given address.
// Use this to create the instance object passed to abigen v2 library functions Call, Transact, etc.
func (c *OGPUToken) Instance(backend bind.ContractBackend, addr common.Address) *bind.BoundContract {
	return bind.NewBoundContract(addr, c.abi, backend, backend, backend)
}

// PackConstructor is the Go binding used to pack the parameters required for
// contract deployment.
//
// Solidity: constructor(address initialOwner, address holder, address treasury_) returns()
func (oGPUToken *OGPUToken) PackConstructor(initialOwner common.Address, holder common.Address, treasury_ common.Address) []byte {
	enc, err := oGPUToken.abi.Pack("", initialOwner, holder, treasury_)
	if err != nil {
		panic(err)
	}
	return enc
}

// PackMAXTAXBPS is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x2c597de9.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function MAX_TAX_BPS() view returns(uint256)
func (oGPUToken *OGPUToken) PackMAXTAXBPS() []byte {
	enc, err := oGPUToken.abi.Pack("MAX_TAX_BPS")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackMAXTAXBPS is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x2c597de9.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function MAX_TAX_BPS() view returns(uint256)
func (oGPUToken *OGPUToken) TryPackMAXTAXBPS() ([]byte, error) {
	return oGPUToken.abi.Pack("MAX_TAX_BPS")
}

// UnpackMAXTAXBPS is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x2c597de9.
//
// Solidity: function MAX_TAX_BPS() view returns(uint256)
func (oGPUToken *OGPUToken) UnpackMAXTAXBPS(data []byte) (*big.Int, error) {
	out, err := oGPUToken.abi.Unpack("MAX_TAX_BPS", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackTOTALSUPPLY is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x902d55a5.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function TOTAL_SUPPLY() view returns(uint256)
func (oGPUToken *OGPUToken) PackTOTALSUPPLY() []byte {
	enc, err := oGPUToken.abi.Pack("TOTAL_SUPPLY")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTOTALSUPPLY is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x902d55a5.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function TOTAL_SUPPLY() view returns(uint256)
func (oGPUToken *OGPUToken) TryPackTOTALSUPPLY() ([]byte, error) {
	return oGPUToken.abi.Pack("TOTAL_SUPPLY")
}

// UnpackTOTALSUPPLY is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x902d55a5.
//
// Solidity: function TOTAL_SUPPLY() view returns(uint256)
func (oGPUToken *OGPUToken) UnpackTOTALSUPPLY(data []byte) (*big.Int, error) {
	out, err := oGPUToken.abi.Unpack("TOTAL_SUPPLY", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackAcceptOwnership is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x79ba5097.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function acceptOwnership() returns()
func (oGPUToken *OGPUToken) PackAcceptOwnership() []byte {
	enc, err := oGPUToken.abi.Pack("acceptOwnership")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackAcceptOwnership is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x79ba5097.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function acceptOwnership() returns()
func (oGPUToken *OGPUToken) TryPackAcceptOwnership() ([]byte, error) {
	return oGPUToken.abi.Pack("acceptOwnership")
}

// PackAllowance is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xdd62ed3e.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function allowance(address owner, address spender) view returns(uint256)
func (oGPUToken *OGPUToken) PackAllowance(owner common.Address, spender common.Address) []byte {
	enc, err := oGPUToken.abi.Pack("allowance", owner, spender)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackAllowance is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xdd62ed3e.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function allowance(address owner, address spender) view returns(uint256)
func (oGPUToken *OGPUToken) TryPackAllowance(owner common.Address, spender common.Address) ([]byte, error) {
	return oGPUToken.abi.Pack("allowance", owner, spender)
}

// UnpackAllowance is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xdd62ed3e.
//
// Solidity: function allowance(address owner, address spender) view returns(uint256)
func (oGPUToken *OGPUToken) UnpackAllowance(data []byte) (*big.Int, error) {
	out, err := oGPUToken.abi.Unpack("allowance", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackApprove is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x095ea7b3.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function approve(address spender, uint256 value) returns(bool)
func (oGPUToken *OGPUToken) PackApprove(spender common.Address, value *big.Int) []byte {
	enc, err := oGPUToken.abi.Pack("approve", spender, value)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackApprove is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x095ea7b3.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function approve(address spender, uint256 value) returns(bool)
func (oGPUToken *OGPUToken) TryPackApprove(spender common.Address, value *big.Int) ([]byte, error) {
	return oGPUToken.abi.Pack("approve", spender, value)
}

// UnpackApprove is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x095ea7b3.
//
// Solidity: function approve(address spender, uint256 value) returns(bool)
func (oGPUToken *OGPUToken) UnpackApprove(data []byte) (bool, error) {
	out, err := oGPUToken.abi.Unpack("approve", data)
	if err != nil {
		return *new(bool), err
	}
	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)
	return out0, nil
}

// PackBalanceOf is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x70a08231.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function balanceOf(address account) view returns(uint256)
func (oGPUToken *OGPUToken) PackBalanceOf(account common.Address) []byte {
	enc, err := oGPUToken.abi.Pack("balanceOf", account)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackBalanceOf is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x70a08231.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function balanceOf(address account) view returns(uint256)
func (oGPUToken *OGPUToken) TryPackBalanceOf(account common.Address) ([]byte, error) {
	return oGPUToken.abi.Pack("balanceOf", account)
}

// UnpackBalanceOf is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x70a08231.
//
// Solidity: function balanceOf(address account) view returns(uint256)
func (oGPUToken *OGPUToken) UnpackBalanceOf(data []byte) (*big.Int, error) {
	out, err := oGPUToken.abi.Unpack("balanceOf", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackDecimals is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x313ce567.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function decimals() view returns(uint8)
func (oGPUToken *OGPUToken) PackDecimals() []byte {
	enc, err := oGPUToken.abi.Pack("decimals")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackDecimals is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x313ce567.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function decimals() view returns(uint8)
func (oGPUToken *OGPUToken) TryPackDecimals() ([]byte, error) {
	return oGPUToken.abi.Pack("decimals")
}

// UnpackDecimals is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x313ce567.
//
// Solidity: function decimals() view returns(uint8)
func (oGPUToken *OGPUToken) UnpackDecimals(data []byte) (uint8, error) {
	out, err := oGPUToken.abi.Unpack("decimals", data)
	if err != nil {
		return *new(uint8), err
	}
	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)
	return out0, nil
}

// PackIsExempt is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xad5dff73.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function isExempt(address ) view returns(bool)
func (oGPUToken *OGPUToken) PackIsExempt(arg0 common.Address) []byte {
	enc, err := oGPUToken.abi.Pack("isExempt", arg0)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackIsExempt is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xad5dff73.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function isExempt(address ) view returns(bool)
func (oGPUToken *OGPUToken) TryPackIsExempt(arg0 common.Address) ([]byte, error) {
	return oGPUToken.abi.Pack("isExempt", arg0)
}

// UnpackIsExempt is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xad5dff73.
//
// Solidity: function isExempt(address ) view returns(bool)
func (oGPUToken *OGPUToken) UnpackIsExempt(data []byte) (bool, error) {
	out, err := oGPUToken.abi.Unpack("isExempt", data)
	if err != nil {
		return *new(bool), err
	}
	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)
	return out0, nil
}

// PackIsPair is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xe5e31b13.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function isPair(address ) view returns(bool)
func (oGPUToken *OGPUToken) PackIsPair(arg0 common.Address) []byte {
	enc, err := oGPUToken.abi.Pack("isPair", arg0)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackIsPair is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xe5e31b13.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function isPair(address ) view returns(bool)
func (oGPUToken *OGPUToken) TryPackIsPair(arg0 common.Address) ([]byte, error) {
	return oGPUToken.abi.Pack("isPair", arg0)
}

// UnpackIsPair is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xe5e31b13.
//
// Solidity: function isPair(address ) view returns(bool)
func (oGPUToken *OGPUToken) UnpackIsPair(data []byte) (bool, error) {
	out, err := oGPUToken.abi.Unpack("isPair", data)
	if err != nil {
		return *new(bool), err
	}
	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)
	return out0, nil
}

// PackLowerTax is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x9e752b95.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function lowerTax(uint256 newBps) returns()
func (oGPUToken *OGPUToken) PackLowerTax(newBps *big.Int) []byte {
	enc, err := oGPUToken.abi.Pack("lowerTax", newBps)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackLowerTax is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x9e752b95.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function lowerTax(uint256 newBps) returns()
func (oGPUToken *OGPUToken) TryPackLowerTax(newBps *big.Int) ([]byte, error) {
	return oGPUToken.abi.Pack("lowerTax", newBps)
}

// PackName is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x06fdde03.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function name() view returns(string)
func (oGPUToken *OGPUToken) PackName() []byte {
	enc, err := oGPUToken.abi.Pack("name")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackName is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x06fdde03.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function name() view returns(string)
func (oGPUToken *OGPUToken) TryPackName() ([]byte, error) {
	return oGPUToken.abi.Pack("name")
}

// UnpackName is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x06fdde03.
//
// Solidity: function name() view returns(string)
func (oGPUToken *OGPUToken) UnpackName(data []byte) (string, error) {
	out, err := oGPUToken.abi.Unpack("name", data)
	if err != nil {
		return *new(string), err
	}
	out0 := *abi.ConvertType(out[0], new(string)).(*string)
	return out0, nil
}

// PackOwner is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8da5cb5b.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function owner() view returns(address)
func (oGPUToken *OGPUToken) PackOwner() []byte {
	enc, err := oGPUToken.abi.Pack("owner")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackOwner is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8da5cb5b.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function owner() view returns(address)
func (oGPUToken *OGPUToken) TryPackOwner() ([]byte, error) {
	return oGPUToken.abi.Pack("owner")
}

// UnpackOwner is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x8da5cb5b.
//
// Solidity: function owner() view returns(address)
func (oGPUToken *OGPUToken) UnpackOwner(data []byte) (common.Address, error) {
	out, err := oGPUToken.abi.Unpack("owner", data)
	if err != nil {
		return *new(common.Address), err
	}
	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)
	return out0, nil
}

// PackPendingOwner is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xe30c3978.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function pendingOwner() view returns(address)
func (oGPUToken *OGPUToken) PackPendingOwner() []byte {
	enc, err := oGPUToken.abi.Pack("pendingOwner")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPendingOwner is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xe30c3978.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function pendingOwner() view returns(address)
func (oGPUToken *OGPUToken) TryPackPendingOwner() ([]byte, error) {
	return oGPUToken.abi.Pack("pendingOwner")
}

// UnpackPendingOwner is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xe30c3978.
//
// Solidity: function pendingOwner() view returns(address)
func (oGPUToken *OGPUToken) UnpackPendingOwner(data []byte) (common.Address, error) {
	out, err := oGPUToken.abi.Unpack("pendingOwner", data)
	if err != nil {
		return *new(common.Address), err
	}
	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)
	return out0, nil
}

// PackRemoveTaxForever is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x05d82c2c.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function removeTaxForever() returns()
func (oGPUToken *OGPUToken) PackRemoveTaxForever() []byte {
	enc, err := oGPUToken.abi.Pack("removeTaxForever")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackRemoveTaxForever is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x05d82c2c.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function removeTaxForever() returns()
func (oGPUToken *OGPUToken) TryPackRemoveTaxForever() ([]byte, error) {
	return oGPUToken.abi.Pack("removeTaxForever")
}

// PackRenounceOwnership is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x715018a6.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function renounceOwnership() returns()
func (oGPUToken *OGPUToken) PackRenounceOwnership() []byte {
	enc, err := oGPUToken.abi.Pack("renounceOwnership")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackRenounceOwnership is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x715018a6.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function renounceOwnership() returns()
func (oGPUToken *OGPUToken) TryPackRenounceOwnership() ([]byte, error) {
	return oGPUToken.abi.Pack("renounceOwnership")
}

// PackSetExempt is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x9fde54f5.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function setExempt(address account, bool exempt) returns()
func (oGPUToken *OGPUToken) PackSetExempt(account common.Address, exempt bool) []byte {
	enc, err := oGPUToken.abi.Pack("setExempt", account, exempt)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackSetExempt is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x9fde54f5.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function setExempt(address account, bool exempt) returns()
func (oGPUToken *OGPUToken) TryPackSetExempt(account common.Address, exempt bool) ([]byte, error) {
	return oGPUToken.abi.Pack("setExempt", account, exempt)
}

// PackSetPair is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x86a22eff.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function setPair(address pair, bool registered) returns()
func (oGPUToken *OGPUToken) PackSetPair(pair common.Address, registered bool) []byte {
	enc, err := oGPUToken.abi.Pack("setPair", pair, registered)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackSetPair is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x86a22eff.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function setPair(address pair, bool registered) returns()
func (oGPUToken *OGPUToken) TryPackSetPair(pair common.Address, registered bool) ([]byte, error) {
	return oGPUToken.abi.Pack("setPair", pair, registered)
}

// PackSetTreasury is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xf0f44260.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function setTreasury(address newTreasury) returns()
func (oGPUToken *OGPUToken) PackSetTreasury(newTreasury common.Address) []byte {
	enc, err := oGPUToken.abi.Pack("setTreasury", newTreasury)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackSetTreasury is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xf0f44260.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function setTreasury(address newTreasury) returns()
func (oGPUToken *OGPUToken) TryPackSetTreasury(newTreasury common.Address) ([]byte, error) {
	return oGPUToken.abi.Pack("setTreasury", newTreasury)
}

// PackSymbol is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x95d89b41.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function symbol() view returns(string)
func (oGPUToken *OGPUToken) PackSymbol() []byte {
	enc, err := oGPUToken.abi.Pack("symbol")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackSymbol is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x95d89b41.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function symbol() view returns(string)
func (oGPUToken *OGPUToken) TryPackSymbol() ([]byte, error) {
	return oGPUToken.abi.Pack("symbol")
}

// UnpackSymbol is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x95d89b41.
//
// Solidity: function symbol() view returns(string)
func (oGPUToken *OGPUToken) UnpackSymbol(data []byte) (string, error) {
	out, err := oGPUToken.abi.Unpack("symbol", data)
	if err != nil {
		return *new(string), err
	}
	out0 := *abi.ConvertType(out[0], new(string)).(*string)
	return out0, nil
}

// PackTaxBps is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x3eacd2f8.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function taxBps() view returns(uint256)
func (oGPUToken *OGPUToken) PackTaxBps() []byte {
	enc, err := oGPUToken.abi.Pack("taxBps")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTaxBps is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x3eacd2f8.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function taxBps() view returns(uint256)
func (oGPUToken *OGPUToken) TryPackTaxBps() ([]byte, error) {
	return oGPUToken.abi.Pack("taxBps")
}

// UnpackTaxBps is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x3eacd2f8.
//
// Solidity: function taxBps() view returns(uint256)
func (oGPUToken *OGPUToken) UnpackTaxBps(data []byte) (*big.Int, error) {
	out, err := oGPUToken.abi.Unpack("taxBps", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackTaxRemovedForever is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xd1838406.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function taxRemovedForever() view returns(bool)
func (oGPUToken *OGPUToken) PackTaxRemovedForever() []byte {
	enc, err := oGPUToken.abi.Pack("taxRemovedForever")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTaxRemovedForever is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xd1838406.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function taxRemovedForever() view returns(bool)
func (oGPUToken *OGPUToken) TryPackTaxRemovedForever() ([]byte, error) {
	return oGPUToken.abi.Pack("taxRemovedForever")
}

// UnpackTaxRemovedForever is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xd1838406.
//
// Solidity: function taxRemovedForever() view returns(bool)
func (oGPUToken *OGPUToken) UnpackTaxRemovedForever(data []byte) (bool, error) {
	out, err := oGPUToken.abi.Unpack("taxRemovedForever", data)
	if err != nil {
		return *new(bool), err
	}
	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)
	return out0, nil
}

// PackTotalSupply is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x18160ddd.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function totalSupply() view returns(uint256)
func (oGPUToken *OGPUToken) PackTotalSupply() []byte {
	enc, err := oGPUToken.abi.Pack("totalSupply")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTotalSupply is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x18160ddd.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function totalSupply() view returns(uint256)
func (oGPUToken *OGPUToken) TryPackTotalSupply() ([]byte, error) {
	return oGPUToken.abi.Pack("totalSupply")
}

// UnpackTotalSupply is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x18160ddd.
//
// Solidity: function totalSupply() view returns(uint256)
func (oGPUToken *OGPUToken) UnpackTotalSupply(data []byte) (*big.Int, error) {
	out, err := oGPUToken.abi.Unpack("totalSupply", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackTransfer is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xa9059cbb.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function transfer(address to, uint256 value) returns(bool)
func (oGPUToken *OGPUToken) PackTransfer(to common.Address, value *big.Int) []byte {
	enc, err := oGPUToken.abi.Pack("transfer", to, value)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTransfer is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xa9059cbb.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function transfer(address to, uint256 value) returns(bool)
func (oGPUToken *OGPUToken) TryPackTransfer(to common.Address, value *big.Int) ([]byte, error) {
	return oGPUToken.abi.Pack("transfer", to, value)
}

// UnpackTransfer is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xa9059cbb.
//
// Solidity: function transfer(address to, uint256 value) returns(bool)
func (oGPUToken *OGPUToken) UnpackTransfer(data []byte) (bool, error) {
	out, err := oGPUToken.abi.Unpack("transfer", data)
	if err != nil {
		return *new(bool), err
	}
	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)
	return out0, nil
}

// PackTransferFrom is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x23b872dd.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function transferFrom(address from, address to, uint256 value) returns(bool)
func (oGPUToken *OGPUToken) PackTransferFrom(from common.Address, to common.Address, value *big.Int) []byte {
	enc, err := oGPUToken.abi.Pack("transferFrom", from, to, value)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTransferFrom is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x23b872dd.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function transferFrom(address from, address to, uint256 value) returns(bool)
func (oGPUToken *OGPUToken) TryPackTransferFrom(from common.Address, to common.Address, value *big.Int) ([]byte, error) {
	return oGPUToken.abi.Pack("transferFrom", from, to, value)
}

// UnpackTransferFrom is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x23b872dd.
//
// Solidity: function transferFrom(address from, address to, uint256 value) returns(bool)
func (oGPUToken *OGPUToken) UnpackTransferFrom(data []byte) (bool, error) {
	out, err := oGPUToken.abi.Unpack("transferFrom", data)
	if err != nil {
		return *new(bool), err
	}
	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)
	return out0, nil
}

// PackTransferOwnership is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xf2fde38b.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function transferOwnership(address newOwner) returns()
func (oGPUToken *OGPUToken) PackTransferOwnership(newOwner common.Address) []byte {
	enc, err := oGPUToken.abi.Pack("transferOwnership", newOwner)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTransferOwnership is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xf2fde38b.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function transferOwnership(address newOwner) returns()
func (oGPUToken *OGPUToken) TryPackTransferOwnership(newOwner common.Address) ([]byte, error) {
	return oGPUToken.abi.Pack("transferOwnership", newOwner)
}

// PackTreasury is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x61d027b3.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function treasury() view returns(address)
func (oGPUToken *OGPUToken) PackTreasury() []byte {
	enc, err := oGPUToken.abi.Pack("treasury")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTreasury is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x61d027b3.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function treasury() view returns(address)
func (oGPUToken *OGPUToken) TryPackTreasury() ([]byte, error) {
	return oGPUToken.abi.Pack("treasury")
}

// UnpackTreasury is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x61d027b3.
//
// Solidity: function treasury() view returns(address)
func (oGPUToken *OGPUToken) UnpackTreasury(data []byte) (common.Address, error) {
	out, err := oGPUToken.abi.Unpack("treasury", data)
	if err != nil {
		return *new(common.Address), err
	}
	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)
	return out0, nil
}

// OGPUTokenApproval represents a Approval event raised by the OGPUToken contract.
type OGPUTokenApproval struct {
	Owner   common.Address
	Spender common.Address
	Value   *big.Int
	Raw     *types.Log // Blockchain specific contextual infos
}

const OGPUTokenApprovalEventName = "Approval"

// ContractEventName returns the user-defined event name.
func (OGPUTokenApproval) ContractEventName() string {
	return OGPUTokenApprovalEventName
}

// UnpackApprovalEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event Approval(address indexed owner, address indexed spender, uint256 value)
func (oGPUToken *OGPUToken) UnpackApprovalEvent(log *types.Log) (*OGPUTokenApproval, error) {
	event := "Approval"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUToken.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUTokenApproval)
	if len(log.Data) > 0 {
		if err := oGPUToken.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUToken.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUTokenExemptSet represents a ExemptSet event raised by the OGPUToken contract.
type OGPUTokenExemptSet struct {
	Account  common.Address
	IsExempt bool
	Raw      *types.Log // Blockchain specific contextual infos
}

const OGPUTokenExemptSetEventName = "ExemptSet"

// ContractEventName returns the user-defined event name.
func (OGPUTokenExemptSet) ContractEventName() string {
	return OGPUTokenExemptSetEventName
}

// UnpackExemptSetEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event ExemptSet(address indexed account, bool isExempt)
func (oGPUToken *OGPUToken) UnpackExemptSetEvent(log *types.Log) (*OGPUTokenExemptSet, error) {
	event := "ExemptSet"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUToken.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUTokenExemptSet)
	if len(log.Data) > 0 {
		if err := oGPUToken.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUToken.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUTokenOwnershipTransferStarted represents a OwnershipTransferStarted event raised by the OGPUToken contract.
type OGPUTokenOwnershipTransferStarted struct {
	PreviousOwner common.Address
	NewOwner      common.Address
	Raw           *types.Log // Blockchain specific contextual infos
}

const OGPUTokenOwnershipTransferStartedEventName = "OwnershipTransferStarted"

// ContractEventName returns the user-defined event name.
func (OGPUTokenOwnershipTransferStarted) ContractEventName() string {
	return OGPUTokenOwnershipTransferStartedEventName
}

// UnpackOwnershipTransferStartedEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event OwnershipTransferStarted(address indexed previousOwner, address indexed newOwner)
func (oGPUToken *OGPUToken) UnpackOwnershipTransferStartedEvent(log *types.Log) (*OGPUTokenOwnershipTransferStarted, error) {
	event := "OwnershipTransferStarted"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUToken.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUTokenOwnershipTransferStarted)
	if len(log.Data) > 0 {
		if err := oGPUToken.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUToken.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUTokenOwnershipTransferred represents a OwnershipTransferred event raised by the OGPUToken contract.
type OGPUTokenOwnershipTransferred struct {
	PreviousOwner common.Address
	NewOwner      common.Address
	Raw           *types.Log // Blockchain specific contextual infos
}

const OGPUTokenOwnershipTransferredEventName = "OwnershipTransferred"

// ContractEventName returns the user-defined event name.
func (OGPUTokenOwnershipTransferred) ContractEventName() string {
	return OGPUTokenOwnershipTransferredEventName
}

// UnpackOwnershipTransferredEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event OwnershipTransferred(address indexed previousOwner, address indexed newOwner)
func (oGPUToken *OGPUToken) UnpackOwnershipTransferredEvent(log *types.Log) (*OGPUTokenOwnershipTransferred, error) {
	event := "OwnershipTransferred"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUToken.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUTokenOwnershipTransferred)
	if len(log.Data) > 0 {
		if err := oGPUToken.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUToken.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUTokenPairSet represents a PairSet event raised by the OGPUToken contract.
type OGPUTokenPairSet struct {
	Pair   common.Address
	IsPair bool
	Raw    *types.Log // Blockchain specific contextual infos
}

const OGPUTokenPairSetEventName = "PairSet"

// ContractEventName returns the user-defined event name.
func (OGPUTokenPairSet) ContractEventName() string {
	return OGPUTokenPairSetEventName
}

// UnpackPairSetEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event PairSet(address indexed pair, bool isPair)
func (oGPUToken *OGPUToken) UnpackPairSetEvent(log *types.Log) (*OGPUTokenPairSet, error) {
	event := "PairSet"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUToken.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUTokenPairSet)
	if len(log.Data) > 0 {
		if err := oGPUToken.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUToken.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUTokenTaxLowered represents a TaxLowered event raised by the OGPUToken contract.
type OGPUTokenTaxLowered struct {
	OldBps *big.Int
	NewBps *big.Int
	Raw    *types.Log // Blockchain specific contextual infos
}

const OGPUTokenTaxLoweredEventName = "TaxLowered"

// ContractEventName returns the user-defined event name.
func (OGPUTokenTaxLowered) ContractEventName() string {
	return OGPUTokenTaxLoweredEventName
}

// UnpackTaxLoweredEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event TaxLowered(uint256 oldBps, uint256 newBps)
func (oGPUToken *OGPUToken) UnpackTaxLoweredEvent(log *types.Log) (*OGPUTokenTaxLowered, error) {
	event := "TaxLowered"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUToken.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUTokenTaxLowered)
	if len(log.Data) > 0 {
		if err := oGPUToken.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUToken.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUTokenTaxRemovedForever represents a TaxRemovedForever event raised by the OGPUToken contract.
type OGPUTokenTaxRemovedForever struct {
	Raw *types.Log // Blockchain specific contextual infos
}

const OGPUTokenTaxRemovedForeverEventName = "TaxRemovedForever"

// ContractEventName returns the user-defined event name.
func (OGPUTokenTaxRemovedForever) ContractEventName() string {
	return OGPUTokenTaxRemovedForeverEventName
}

// UnpackTaxRemovedForeverEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event TaxRemovedForever()
func (oGPUToken *OGPUToken) UnpackTaxRemovedForeverEvent(log *types.Log) (*OGPUTokenTaxRemovedForever, error) {
	event := "TaxRemovedForever"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUToken.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUTokenTaxRemovedForever)
	if len(log.Data) > 0 {
		if err := oGPUToken.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUToken.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUTokenTransfer represents a Transfer event raised by the OGPUToken contract.
type OGPUTokenTransfer struct {
	From  common.Address
	To    common.Address
	Value *big.Int
	Raw   *types.Log // Blockchain specific contextual infos
}

const OGPUTokenTransferEventName = "Transfer"

// ContractEventName returns the user-defined event name.
func (OGPUTokenTransfer) ContractEventName() string {
	return OGPUTokenTransferEventName
}

// UnpackTransferEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event Transfer(address indexed from, address indexed to, uint256 value)
func (oGPUToken *OGPUToken) UnpackTransferEvent(log *types.Log) (*OGPUTokenTransfer, error) {
	event := "Transfer"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUToken.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUTokenTransfer)
	if len(log.Data) > 0 {
		if err := oGPUToken.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUToken.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// OGPUTokenTreasurySet represents a TreasurySet event raised by the OGPUToken contract.
type OGPUTokenTreasurySet struct {
	OldTreasury common.Address
	NewTreasury common.Address
	Raw         *types.Log // Blockchain specific contextual infos
}

const OGPUTokenTreasurySetEventName = "TreasurySet"

// ContractEventName returns the user-defined event name.
func (OGPUTokenTreasurySet) ContractEventName() string {
	return OGPUTokenTreasurySetEventName
}

// UnpackTreasurySetEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event TreasurySet(address indexed oldTreasury, address indexed newTreasury)
func (oGPUToken *OGPUToken) UnpackTreasurySetEvent(log *types.Log) (*OGPUTokenTreasurySet, error) {
	event := "TreasurySet"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != oGPUToken.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(OGPUTokenTreasurySet)
	if len(log.Data) > 0 {
		if err := oGPUToken.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range oGPUToken.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// UnpackError attempts to decode the provided error data using user-defined
// error definitions.
func (oGPUToken *OGPUToken) UnpackError(raw []byte) (any, error) {
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["ERC20InsufficientAllowance"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackERC20InsufficientAllowanceError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["ERC20InsufficientBalance"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackERC20InsufficientBalanceError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["ERC20InvalidApprover"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackERC20InvalidApproverError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["ERC20InvalidReceiver"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackERC20InvalidReceiverError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["ERC20InvalidSender"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackERC20InvalidSenderError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["ERC20InvalidSpender"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackERC20InvalidSpenderError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["OwnableInvalidOwner"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackOwnableInvalidOwnerError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["OwnableUnauthorizedAccount"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackOwnableUnauthorizedAccountError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["TaxCanOnlyGoDown"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackTaxCanOnlyGoDownError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["TaxIsRemovedForever"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackTaxIsRemovedForeverError(raw[4:])
	}
	if bytes.Equal(raw[:4], oGPUToken.abi.Errors["ZeroAddress"].ID.Bytes()[:4]) {
		return oGPUToken.UnpackZeroAddressError(raw[4:])
	}
	return nil, errors.New("Unknown error")
}

// OGPUTokenERC20InsufficientAllowance represents a ERC20InsufficientAllowance error raised by the OGPUToken contract.
type OGPUTokenERC20InsufficientAllowance struct {
	Spender   common.Address
	Allowance *big.Int
	Needed    *big.Int
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ERC20InsufficientAllowance(address spender, uint256 allowance, uint256 needed)
func OGPUTokenERC20InsufficientAllowanceErrorID() common.Hash {
	return common.HexToHash("0xfb8f41b23e99d2101d86da76cdfa87dd51c82ed07d3cb62cbc473e469dbc75c3")
}

// UnpackERC20InsufficientAllowanceError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ERC20InsufficientAllowance(address spender, uint256 allowance, uint256 needed)
func (oGPUToken *OGPUToken) UnpackERC20InsufficientAllowanceError(raw []byte) (*OGPUTokenERC20InsufficientAllowance, error) {
	out := new(OGPUTokenERC20InsufficientAllowance)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "ERC20InsufficientAllowance", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenERC20InsufficientBalance represents a ERC20InsufficientBalance error raised by the OGPUToken contract.
type OGPUTokenERC20InsufficientBalance struct {
	Sender  common.Address
	Balance *big.Int
	Needed  *big.Int
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed)
func OGPUTokenERC20InsufficientBalanceErrorID() common.Hash {
	return common.HexToHash("0xe450d38cd8d9f7d95077d567d60ed49c7254716e6ad08fc9872816c97e0ffec6")
}

// UnpackERC20InsufficientBalanceError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed)
func (oGPUToken *OGPUToken) UnpackERC20InsufficientBalanceError(raw []byte) (*OGPUTokenERC20InsufficientBalance, error) {
	out := new(OGPUTokenERC20InsufficientBalance)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "ERC20InsufficientBalance", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenERC20InvalidApprover represents a ERC20InvalidApprover error raised by the OGPUToken contract.
type OGPUTokenERC20InvalidApprover struct {
	Approver common.Address
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ERC20InvalidApprover(address approver)
func OGPUTokenERC20InvalidApproverErrorID() common.Hash {
	return common.HexToHash("0xe602df05cc75712490294c6c104ab7c17f4030363910a7a2626411c6d3118847")
}

// UnpackERC20InvalidApproverError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ERC20InvalidApprover(address approver)
func (oGPUToken *OGPUToken) UnpackERC20InvalidApproverError(raw []byte) (*OGPUTokenERC20InvalidApprover, error) {
	out := new(OGPUTokenERC20InvalidApprover)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "ERC20InvalidApprover", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenERC20InvalidReceiver represents a ERC20InvalidReceiver error raised by the OGPUToken contract.
type OGPUTokenERC20InvalidReceiver struct {
	Receiver common.Address
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ERC20InvalidReceiver(address receiver)
func OGPUTokenERC20InvalidReceiverErrorID() common.Hash {
	return common.HexToHash("0xec442f055133b72f3b2f9f0bb351c406b178527de2040a7d1feb4e058771f613")
}

// UnpackERC20InvalidReceiverError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ERC20InvalidReceiver(address receiver)
func (oGPUToken *OGPUToken) UnpackERC20InvalidReceiverError(raw []byte) (*OGPUTokenERC20InvalidReceiver, error) {
	out := new(OGPUTokenERC20InvalidReceiver)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "ERC20InvalidReceiver", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenERC20InvalidSender represents a ERC20InvalidSender error raised by the OGPUToken contract.
type OGPUTokenERC20InvalidSender struct {
	Sender common.Address
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ERC20InvalidSender(address sender)
func OGPUTokenERC20InvalidSenderErrorID() common.Hash {
	return common.HexToHash("0x96c6fd1edd0cd6ef7ff0ecc0facdf53148dc0048b57fe58af65755250a7a96bd")
}

// UnpackERC20InvalidSenderError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ERC20InvalidSender(address sender)
func (oGPUToken *OGPUToken) UnpackERC20InvalidSenderError(raw []byte) (*OGPUTokenERC20InvalidSender, error) {
	out := new(OGPUTokenERC20InvalidSender)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "ERC20InvalidSender", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenERC20InvalidSpender represents a ERC20InvalidSpender error raised by the OGPUToken contract.
type OGPUTokenERC20InvalidSpender struct {
	Spender common.Address
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ERC20InvalidSpender(address spender)
func OGPUTokenERC20InvalidSpenderErrorID() common.Hash {
	return common.HexToHash("0x94280d62c347d8d9f4d59a76ea321452406db88df38e0c9da304f58b57b373a2")
}

// UnpackERC20InvalidSpenderError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ERC20InvalidSpender(address spender)
func (oGPUToken *OGPUToken) UnpackERC20InvalidSpenderError(raw []byte) (*OGPUTokenERC20InvalidSpender, error) {
	out := new(OGPUTokenERC20InvalidSpender)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "ERC20InvalidSpender", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenOwnableInvalidOwner represents a OwnableInvalidOwner error raised by the OGPUToken contract.
type OGPUTokenOwnableInvalidOwner struct {
	Owner common.Address
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error OwnableInvalidOwner(address owner)
func OGPUTokenOwnableInvalidOwnerErrorID() common.Hash {
	return common.HexToHash("0x1e4fbdf7f3ef8bcaa855599e3abf48b232380f183f08f6f813d9ffa5bd585188")
}

// UnpackOwnableInvalidOwnerError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error OwnableInvalidOwner(address owner)
func (oGPUToken *OGPUToken) UnpackOwnableInvalidOwnerError(raw []byte) (*OGPUTokenOwnableInvalidOwner, error) {
	out := new(OGPUTokenOwnableInvalidOwner)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "OwnableInvalidOwner", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenOwnableUnauthorizedAccount represents a OwnableUnauthorizedAccount error raised by the OGPUToken contract.
type OGPUTokenOwnableUnauthorizedAccount struct {
	Account common.Address
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error OwnableUnauthorizedAccount(address account)
func OGPUTokenOwnableUnauthorizedAccountErrorID() common.Hash {
	return common.HexToHash("0x118cdaa7a341953d1887a2245fd6665d741c67c8c50581daa59e1d03373fa188")
}

// UnpackOwnableUnauthorizedAccountError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error OwnableUnauthorizedAccount(address account)
func (oGPUToken *OGPUToken) UnpackOwnableUnauthorizedAccountError(raw []byte) (*OGPUTokenOwnableUnauthorizedAccount, error) {
	out := new(OGPUTokenOwnableUnauthorizedAccount)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "OwnableUnauthorizedAccount", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenTaxCanOnlyGoDown represents a TaxCanOnlyGoDown error raised by the OGPUToken contract.
type OGPUTokenTaxCanOnlyGoDown struct {
	CurrentBps   *big.Int
	RequestedBps *big.Int
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error TaxCanOnlyGoDown(uint256 currentBps, uint256 requestedBps)
func OGPUTokenTaxCanOnlyGoDownErrorID() common.Hash {
	return common.HexToHash("0x18795531e896dfcd6e028e775cd47729d2c19a31bafb0c3b7cf201f6ee0041fc")
}

// UnpackTaxCanOnlyGoDownError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error TaxCanOnlyGoDown(uint256 currentBps, uint256 requestedBps)
func (oGPUToken *OGPUToken) UnpackTaxCanOnlyGoDownError(raw []byte) (*OGPUTokenTaxCanOnlyGoDown, error) {
	out := new(OGPUTokenTaxCanOnlyGoDown)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "TaxCanOnlyGoDown", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenTaxIsRemovedForever represents a TaxIsRemovedForever error raised by the OGPUToken contract.
type OGPUTokenTaxIsRemovedForever struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error TaxIsRemovedForever()
func OGPUTokenTaxIsRemovedForeverErrorID() common.Hash {
	return common.HexToHash("0x089ed8d96e71e6694b1322f864b23a5ee96fc8a2428d272c3393dbdc4183ecb7")
}

// UnpackTaxIsRemovedForeverError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error TaxIsRemovedForever()
func (oGPUToken *OGPUToken) UnpackTaxIsRemovedForeverError(raw []byte) (*OGPUTokenTaxIsRemovedForever, error) {
	out := new(OGPUTokenTaxIsRemovedForever)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "TaxIsRemovedForever", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// OGPUTokenZeroAddress represents a ZeroAddress error raised by the OGPUToken contract.
type OGPUTokenZeroAddress struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ZeroAddress()
func OGPUTokenZeroAddressErrorID() common.Hash {
	return common.HexToHash("0xd92e233df2717d4a40030e20904abd27b68fcbeede117eaaccbbdac9618c8c73")
}

// UnpackZeroAddressError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ZeroAddress()
func (oGPUToken *OGPUToken) UnpackZeroAddressError(raw []byte) (*OGPUTokenZeroAddress, error) {
	out := new(OGPUTokenZeroAddress)
	if err := oGPUToken.abi.UnpackIntoInterface(out, "ZeroAddress", raw); err != nil {
		return nil, err
	}
	return out, nil
}
