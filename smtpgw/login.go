package smtpgw

import (
	"errors"

	"github.com/emersion/go-sasl"
)

// loginServer is the server side of the LOGIN mechanism
// (draft-murchison-sasl-login): the server asks "Username:" and then
// "Password:", the client answers each; an initial response, if any, is
// the user name. go-sasl ships only the client side.
type loginServer struct {
	check    func(username, password string) error
	username string
	step     int
}

func newLoginServer(check func(username, password string) error) sasl.Server {
	return &loginServer{check: check}
}

var errLoginDone = errors.New("LOGIN exchange already finished")

func (l *loginServer) Next(response []byte) (challenge []byte, done bool, err error) {
	switch l.step {
	case 0:
		l.step = 1
		if response == nil {
			return []byte("Username:"), false, nil
		}
		fallthrough // the initial response is the user name
	case 1:
		l.username = string(response)
		l.step = 2
		return []byte("Password:"), false, nil
	case 2:
		l.step = 3
		if err := l.check(l.username, string(response)); err != nil {
			return nil, true, err
		}
		return nil, true, nil
	}
	return nil, true, errLoginDone
}
