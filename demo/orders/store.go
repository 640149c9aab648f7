package orders

import (
	"fmt"
	"sync"
)

// Statuses an order can be in, in the order an order normally moves through them.
var Statuses = []string{"pending", "processing", "shipped", "delivered", "cancelled"}

// Order is one order as the tools report it. Amounts are in the order's currency, with two decimals.
type Order struct {
	OrderID  int64   `json:"order_id"`
	Status   string  `json:"status"`
	Customer string  `json:"customer"`
	Email    string  `json:"email"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	Region   string  `json:"region"`
	Refunded float64 `json:"refunded"`
}

// Refund is the record refund_order returns.
type Refund struct {
	RefundID            string  `json:"refund_id"`
	OrderID             int64   `json:"order_id"`
	Amount              float64 `json:"amount"`
	Currency            string  `json:"currency"`
	Reason              string  `json:"reason"`
	RefundedTotal       float64 `json:"refunded_total"`
	RemainingRefundable float64 `json:"remaining_refundable"`
}

// order is the stored form: money in cents so that refunds add up exactly.
type order struct {
	id            int64
	status        string
	customer      string
	email         string
	amountCents   int64
	currency      string
	region        string
	refundedCents int64
}

func (o *order) view() Order {
	return Order{
		OrderID:  o.id,
		Status:   o.status,
		Customer: o.customer,
		Email:    o.email,
		Amount:   fromCents(o.amountCents),
		Currency: o.currency,
		Region:   o.region,
		Refunded: fromCents(o.refundedCents),
	}
}

func fromCents(c int64) float64 { return float64(c) / 100 }

// store is the in-memory order book. All methods are safe for concurrent use.
type store struct {
	mu         sync.Mutex
	orders     map[int64]*order
	nextRefund int
	nextReply  int
}

// seedOrders is the fixed starting data of every new server. Order 4821 is the one from the
// order-support scenario ("update order #4821 and prepare a reply to the customer").
func seedOrders() []*order {
	return []*order{
		{id: 4821, status: "processing", customer: "Olena Kovalenko", email: "olena.k@example.com", amountCents: 12999, currency: "EUR", region: "eu"},
		{id: 4822, status: "pending", customer: "James Carter", email: "j.carter@example.com", amountCents: 4550, currency: "USD", region: "us"},
		{id: 4823, status: "shipped", customer: "Mia Schneider", email: "mia.schneider@example.com", amountCents: 8900, currency: "EUR", region: "eu"},
		{id: 4824, status: "delivered", customer: "Aiko Tanaka", email: "aiko.t@example.com", amountCents: 23000, currency: "USD", region: "us"},
		{id: 4825, status: "cancelled", customer: "Pedro Alves", email: "pedro.alves@example.com", amountCents: 1599, currency: "EUR", region: "eu"},
	}
}

func newStore() *store {
	s := &store{orders: make(map[int64]*order), nextRefund: 1, nextReply: 1}
	for _, o := range seedOrders() {
		s.orders[o.id] = o
	}
	return s
}

// toolError is an error the model should see as the tool's own answer (isError: true).
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func notFound(id int64) error { return &toolError{fmt.Sprintf("order %d not found", id)} }

func (s *store) get(id int64) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return Order{}, notFound(id)
	}
	return o.view(), nil
}

func terminal(status string) bool { return status == "delivered" || status == "cancelled" }

// setStatus moves an order to status. Setting the status it already has is a no-op success
// (the tool is idempotent). A delivered or cancelled order cannot move to another status.
func (s *store) setStatus(id int64, status string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return notFound(id)
	}
	if o.status == status {
		return nil
	}
	if terminal(o.status) {
		return &toolError{fmt.Sprintf("order %d is %s; a %s order cannot change status (requested %q)", id, o.status, o.status, status)}
	}
	o.status = status
	return nil
}

// refund records a refund of amountCents against the order, refusing any refund that would
// take the refunded total above the order amount.
func (s *store) refund(id int64, amountCents int64, reason string) (Refund, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return Refund{}, notFound(id)
	}
	remaining := o.amountCents - o.refundedCents
	if amountCents > remaining {
		return Refund{}, &toolError{fmt.Sprintf(
			"refund of %.2f %s exceeds what can still be refunded on order %d (order amount %.2f, already refunded %.2f, remaining %.2f)",
			fromCents(amountCents), o.currency, id, fromCents(o.amountCents), fromCents(o.refundedCents), fromCents(remaining))}
	}
	o.refundedCents += amountCents
	r := Refund{
		RefundID:            fmt.Sprintf("rf_%04d", s.nextRefund),
		OrderID:             id,
		Amount:              fromCents(amountCents),
		Currency:            o.currency,
		Reason:              reason,
		RefundedTotal:       fromCents(o.refundedCents),
		RemainingRefundable: fromCents(o.amountCents - o.refundedCents),
	}
	s.nextRefund++
	return r, nil
}

// reply records an outgoing customer message and returns its id.
func (s *store) reply(id int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.orders[id]; !ok {
		return "", notFound(id)
	}
	mid := fmt.Sprintf("msg_%04d", s.nextReply)
	s.nextReply++
	return mid, nil
}
