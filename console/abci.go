package console

import abci "github.com/cometbft/cometbft/abci/types"

type abciEvent = abci.Event
