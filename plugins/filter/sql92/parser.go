package sql92

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/quivermq/quiver/core/filter"
)

// exp is a parsed expression with what RocketMQ's parse-time checks look
// at: whether it is a ConstantExpression (a literal, possibly in
// parentheses or after a unary '+'), a BooleanExpression, or a
// PropertyExpression.
type exp struct {
	n       node
	pos     int
	height  int
	isConst bool  // ConstantExpression: c is its value
	isBool  bool  // BooleanExpression (TRUE, FALSE and NULL are both)
	isProp  bool  // PropertyExpression: name is the property
	c       value // when isConst
	name    string
}

type parser struct {
	src      string
	toks     []token
	i        int
	depth    int
	maxDepth int
}

func (p *parser) errf(pos int, format string, args ...any) error {
	return &filter.SyntaxError{Type: filter.TypeSQL92, Expr: p.src, Pos: pos, Expected: fmt.Sprintf(format, args...)}
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) peekAt(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.k != tEOF {
		p.i++
	}
	return t
}

// parse parses a whole expression, which must be a condition.
func parse(src string, maxDepth int) (node, error) {
	p := &parser{src: src, maxDepth: maxDepth}
	toks, err := lex(src, p.errf)
	if err != nil {
		return nil, err
	}
	p.toks = toks
	if p.peek().k == tEOF {
		return nil, p.errf(p.peek().pos, "expected an expression, found end of expression")
	}
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.k != tEOF {
		// RocketMQ's JmsSelector stops at the first token that cannot
		// continue the expression and ignores the rest; Quiver refuses
		// it, so that a typo does not silently change the filter.
		hint := ""
		if t.k == tID && strings.EqualFold(t.text, "LIKE") {
			hint = " (LIKE is not supported: use CONTAINS, STARTSWITH or ENDSWITH)"
		}
		return nil, p.errf(t.pos, "expected AND, OR or end of expression, found %s%s", t.describe(), hint)
	}
	b, err := p.asBool(e, "the expression")
	if err != nil {
		return nil, err
	}
	return b.n, nil
}

// asBool is SelectorParser.asBooleanExpression: a boolean expression as
// is, a property through a boolean cast, anything else refused.
func (p *parser) asBool(e exp, where string) (exp, error) {
	if e.isBool {
		return e, nil
	}
	if e.isProp {
		return p.mk(e.pos, &boolCastNode{x: e.n}, true, e)
	}
	return exp{}, p.errf(e.pos, "expected a condition for %s, found %s (a value, not TRUE or FALSE)", where, p.describe(e))
}

// describe names an operand for error messages.
func (p *parser) describe(e exp) string {
	switch {
	case e.isConst && e.c.k == kString:
		return "a string literal"
	case e.isConst && e.c.k == kNull:
		return "NULL"
	case e.isConst && e.c.k == kBool:
		return strings.ToUpper(strconv.FormatBool(e.c.b))
	case e.isConst:
		return "a number"
	case e.isProp:
		return "property " + e.name
	case e.isBool:
		return "a condition"
	}
	return "a negation"
}

// mk wraps n as a new expression whose children are kids, enforcing the
// tree height limit.
func (p *parser) mk(pos int, n node, isBool bool, kids ...exp) (exp, error) {
	h := 0
	for _, k := range kids {
		h = max(h, k.height)
	}
	h++
	if h > p.maxDepth {
		return exp{}, p.errDepth(pos)
	}
	return exp{n: n, pos: pos, height: h, isBool: isBool}, nil
}

func (p *parser) errDepth(pos int) error {
	return p.errf(pos, "expected at most %d levels of nesting (filter.sql92.max_depth)", p.maxDepth)
}

func (p *parser) parseOr() (exp, error) { return p.parseLogic(tOr, "OR", p.parseAnd) }

func (p *parser) parseAnd() (exp, error) { return p.parseLogic(tAnd, "AND", p.parseEquality) }

// parseLogic parses operand (op operand)* into one flattened node, which
// evaluates exactly like RocketMQ's left-deep chain of LogicExpressions.
func (p *parser) parseLogic(op tokKind, name string, operand func() (exp, error)) (exp, error) {
	first, err := operand()
	if err != nil || p.peek().k != op {
		return first, err
	}
	kids := []exp{first}
	for p.peek().k == op {
		opTok := p.next()
		if err := p.needOperand(opTok); err != nil {
			return exp{}, err
		}
		e, err := operand()
		if err != nil {
			return exp{}, err
		}
		kids = append(kids, e)
	}
	nodes := make([]node, len(kids))
	for i, k := range kids {
		b, err := p.asBool(k, "an operand of "+name)
		if err != nil {
			return exp{}, err
		}
		kids[i] = b
		nodes[i] = b.n
	}
	// TRUE OR ... is TRUE and FALSE AND ... is FALSE before anything is
	// evaluated; folding them lets MatchesAll see "TRUE OR x".
	if c, ok := nodes[0].(*constNode); ok && c.v.k == kBool && c.v.b == (op == tOr) {
		return p.mk(first.pos, c, true, kids...)
	}
	if op == tOr {
		return p.mk(first.pos, &orNode{xs: nodes}, true, kids...)
	}
	return p.mk(first.pos, &andNode{xs: nodes}, true, kids...)
}

// needOperand gives a clear error when an operator has nothing after it.
func (p *parser) needOperand(op token) error {
	if t := p.peek(); t.k == tEOF {
		return p.errf(t.pos, "expected an operand after %s, found end of expression", strings.ToUpper(op.text))
	}
	return nil
}

// parseEquality: comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
func (p *parser) parseEquality() (exp, error) {
	left, err := p.parseComparison()
	if err != nil {
		return exp{}, err
	}
	for {
		t := p.peek()
		switch t.k {
		case tEq, tNe:
			p.next()
			if err := p.needOperand(t); err != nil {
				return exp{}, err
			}
			right, err := p.parseComparison()
			if err != nil {
				return exp{}, err
			}
			if left, err = p.createEqual(t, left, right); err != nil {
				return exp{}, err
			}
			if t.k == tNe {
				if left, err = p.mk(t.pos, &notNode{x: left.n}, true, left); err != nil {
					return exp{}, err
				}
			}
		case tIs:
			p.next()
			not := false
			if p.peek().k == tNot {
				p.next()
				not = true
			}
			if n := p.peek(); n.k != tNull {
				if not {
					return exp{}, p.errf(n.pos, "expected NULL after IS NOT, found %s", n.describe())
				}
				return exp{}, p.errf(n.pos, "expected NULL or NOT NULL after IS, found %s", n.describe())
			}
			p.next()
			if left, err = p.mk(t.pos, &isNullNode{x: left.n}, true, left); err != nil {
				return exp{}, err
			}
			if not {
				if left, err = p.mk(t.pos, &notNode{x: left.n}, true, left); err != nil {
					return exp{}, err
				}
			}
		default:
			return left, nil
		}
	}
}

// createEqual is ComparisonExpression.createEqual with its checks: NULL
// cannot be compared (use IS NULL), and TRUE or FALSE cannot be compared
// with a string or number literal.
func (p *parser) createEqual(op token, l, r exp) (exp, error) {
	for _, e := range []exp{l, r} {
		if e.isConst && e.c.k == kNull {
			return exp{}, p.errf(e.pos, "expected a value to compare with %s, found NULL (write IS NULL or IS NOT NULL)", op.text)
		}
	}
	if l.isConst && r.isConst && l.isBool && !r.isBool {
		return exp{}, p.errf(r.pos, "expected TRUE or FALSE to compare with %s, found %s", p.describe(l), p.describe(r))
	}
	var n node = &eqNode{l: l.n, r: r.n}
	if c, ok := r.n.(*constNode); ok && l.isProp && c.v.k == kString {
		// Not for 'x' = a, which is FALSE, not null, when a is absent.
		n = &propEqStrNode{name: l.name, s: c.v.s}
	}
	return p.mk(op.pos, n, true, l, r)
}

// parseComparison: unary ( ('>'|'>='|'<'|'<=') unary | [NOT] (CONTAINS|STARTSWITH|ENDSWITH) string
//
//	| [NOT] BETWEEN unary AND unary | [NOT] IN '(' string (',' string)* ')' )*
func (p *parser) parseComparison() (exp, error) {
	left, err := p.parseUnary()
	if err != nil {
		return exp{}, err
	}
	for {
		t := p.peek()
		not := false
		switch t.k {
		case tGt, tGe, tLt, tLe:
			p.next()
			if err := p.needOperand(t); err != nil {
				return exp{}, err
			}
			right, err := p.parseUnary()
			if err != nil {
				return exp{}, err
			}
			if left, err = p.createOrdered(t, cmpOpOf(t.k), left, right); err != nil {
				return exp{}, err
			}
			continue
		case tNot:
			switch p.peekAt(1).k {
			case tContains, tStartsWith, tEndsWith, tBetween, tIn:
			default:
				n := p.peekAt(1)
				return exp{}, p.errf(n.pos, "expected CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT, found %s", n.describe())
			}
			p.next()
			not = true
		case tContains, tStartsWith, tEndsWith, tBetween, tIn:
		default:
			return left, nil
		}
		op := p.next()
		switch op.k {
		case tContains, tStartsWith, tEndsWith:
			s, err := p.expectString(op)
			if err != nil {
				return exp{}, err
			}
			n := &strOpNode{op: strOpOf(op.k), x: left.n, search: s, not: not}
			if left, err = p.mk(t.pos, n, true, left); err != nil {
				return exp{}, err
			}
		case tBetween:
			if left, err = p.parseBetween(t, op, left, not); err != nil {
				return exp{}, err
			}
		case tIn:
			if left, err = p.parseIn(t, op, left, not); err != nil {
				return exp{}, err
			}
		}
	}
}

func cmpOpOf(k tokKind) cmpOp {
	switch k {
	case tGt:
		return opGT
	case tGe:
		return opGE
	case tLt:
		return opLT
	}
	return opLE
}

func strOpOf(k tokKind) strOp {
	switch k {
	case tContains:
		return opContains
	case tStartsWith:
		return opStartsWith
	}
	return opEndsWith
}

func (p *parser) expectString(after token) (string, error) {
	t := p.peek()
	if t.k != tString {
		return "", p.errf(t.pos, "expected a string literal after %s, found %s", strings.ToUpper(after.text), t.describe())
	}
	p.next()
	return t.str, nil
}

// checkOrdered is ComparisonExpression.checkLessThanOperand: only numbers
// (literals or not) can be ordered; string, TRUE, FALSE and NULL literals
// and conditions cannot.
func (p *parser) checkOrdered(op string, e exp) error {
	if e.isConst {
		if e.c.numeric() {
			return nil
		}
		return p.errf(e.pos, "expected a number or a property to compare with %s, found %s", op, p.describe(e))
	}
	if e.isBool {
		hint := ""
		if _, ok := e.n.(*notNode); ok {
			hint = " (NOT binds tighter than comparisons: write NOT (...))"
		}
		return p.errf(e.pos, "expected a number or a property to compare with %s, found %s%s", op, p.describe(e), hint)
	}
	return nil
}

func (p *parser) createOrdered(t token, op cmpOp, l, r exp) (exp, error) {
	if err := p.checkOrdered(op.String(), l); err != nil {
		return exp{}, err
	}
	if err := p.checkOrdered(op.String(), r); err != nil {
		return exp{}, err
	}
	var n node = &cmpNode{op: op, l: l.n, r: r.n}
	if c, ok := r.n.(*constNode); ok && l.isProp && c.v.numeric() {
		n = &propCmpNumNode{op: op, name: l.name, c: c.v}
	}
	return p.mk(t.pos, n, true, l, r)
}

// parseBetween is ComparisonExpression.createBetween (value >= low AND
// value <= high, with literal bounds checked to be in order) and
// createNotBetween (value < low OR value > high).
func (p *parser) parseBetween(start, op token, value exp, not bool) (exp, error) {
	if err := p.needOperand(op); err != nil {
		return exp{}, err
	}
	low, err := p.parseUnary()
	if err != nil {
		return exp{}, err
	}
	if t := p.peek(); t.k != tAnd {
		return exp{}, p.errf(t.pos, "expected AND between the bounds of BETWEEN, found %s", t.describe())
	}
	and := p.next()
	if err := p.needOperand(and); err != nil {
		return exp{}, err
	}
	high, err := p.parseUnary()
	if err != nil {
		return exp{}, err
	}
	name := "BETWEEN"
	if not {
		name = "NOT BETWEEN"
	}
	if !not && low.isConst && high.isConst {
		if low.c.k == kNull || high.c.k == kNull {
			return exp{}, p.errf(low.pos, "expected values as the bounds of BETWEEN, found NULL")
		}
		c, ok := javaCompare(high.c, low.c)
		if !ok {
			return exp{}, p.errf(low.pos, "expected comparable bounds for BETWEEN, found %s and %s", p.describe(low), p.describe(high))
		}
		if c < 0 {
			return exp{}, p.errf(low.pos, "expected the lower bound of BETWEEN first, found %s > %s",
				strings.TrimSpace(p.src[low.pos:and.pos]), strings.TrimSpace(p.src[high.pos:p.peek().pos]))
		}
	}
	lo, hi := opGE, opLE
	if not {
		lo, hi = opLT, opGT
	}
	a, err := p.createOrdered(start, lo, value, low)
	if err != nil {
		return exp{}, rename(err, name)
	}
	b, err := p.createOrdered(start, hi, value, high)
	if err != nil {
		return exp{}, rename(err, name)
	}
	if not {
		return p.mk(start.pos, &orNode{xs: []node{a.n, b.n}}, true, a, b)
	}
	return p.mk(start.pos, &andNode{xs: []node{a.n, b.n}}, true, a, b)
}

// rename makes the operator in a check's message the one the user wrote.
func rename(err error, name string) error {
	if se := (*filter.SyntaxError)(nil); errors.As(err, &se) {
		for _, op := range []string{">=", "<=", ">", "<"} {
			if strings.Contains(se.Expected, "compare with "+op+",") {
				se.Expected = strings.Replace(se.Expected, "compare with "+op+",", "compare with "+name+",", 1)
				break
			}
		}
	}
	return err
}

// setMin is the list length from which IN uses a map (RocketMQ switches
// to a HashSet at 5).
const setMin = 8

// parseIn is ComparisonExpression.createInFilter / createNotInFilter:
// the left side must be a property, the list non-empty string literals.
func (p *parser) parseIn(start, op token, left exp, not bool) (exp, error) {
	name := "IN"
	if not {
		name = "NOT IN"
	}
	if t := p.peek(); t.k != tLParen {
		return exp{}, p.errf(t.pos, "expected '(' after %s, found %s", name, t.describe())
	}
	p.next()
	var list []string
	for {
		t := p.peek()
		if t.k != tString {
			if len(list) == 0 {
				return exp{}, p.errf(t.pos, "expected a string literal in the %s list, found %s", name, t.describe())
			}
			return exp{}, p.errf(t.pos, "expected a string literal after ',' in the %s list, found %s", name, t.describe())
		}
		p.next()
		list = append(list, t.str)
		if t := p.peek(); t.k == tComma {
			p.next()
			continue
		}
		break
	}
	if t := p.peek(); t.k != tRParen {
		return exp{}, p.errf(t.pos, "expected ')' after %s list, found %s", name, t.describe())
	}
	p.next()
	if !left.isProp {
		return exp{}, p.errf(left.pos, "expected a property before %s, found %s", name, p.describe(left))
	}
	n := &inNode{name: left.name, list: list, not: not}
	if len(list) >= setMin {
		n.set = make(map[string]struct{}, len(list))
		for _, s := range list {
			n.set[s] = struct{}{}
		}
		n.list = nil
	}
	return p.mk(start.pos, n, true, left)
}

// parseUnary: '+' unary | '-' unary | NOT unary | primary
func (p *parser) parseUnary() (exp, error) {
	t := p.peek()
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > p.maxDepth {
		return exp{}, p.errDepth(t.pos)
	}
	switch t.k {
	case tPlus, tMinus, tNot:
		p.next()
		if err := p.needOperand(t); err != nil {
			return exp{}, err
		}
		x, err := p.parseUnary()
		if err != nil {
			return exp{}, err
		}
		switch t.k {
		case tPlus:
			// "+" unaryExpr() returns the operand itself.
			x.pos = t.pos
			return x, nil
		case tMinus:
			if c, ok := x.n.(*constNode); ok {
				// Fold: negating a literal always gives the same value. The
				// result is still not a ConstantExpression for the checks.
				e, err := p.mk(t.pos, &constNode{v: negate(c.v)}, false, x)
				return e, err
			}
			return p.mk(t.pos, &negNode{x: x.n}, false, x)
		}
		b, err := p.asBool(x, "NOT")
		if err != nil {
			return exp{}, err
		}
		return p.mk(t.pos, &notNode{x: b.n}, true, b)
	}
	return p.parsePrimary()
}

// parsePrimary: literal | property | '(' or ')'
func (p *parser) parsePrimary() (exp, error) {
	t := p.next()
	switch t.k {
	case tString:
		return p.literal(t, value{k: kString, s: t.str}), nil
	case tDecimal:
		text := strings.TrimRight(t.text, "lL")
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return exp{}, p.errf(t.pos, "expected an integer of at most %d, found %s (a long overflows; write a float such as %s.0)", int64(math.MaxInt64), t.text, text)
		}
		if v <= math.MaxInt32 {
			return p.literal(t, value{k: kInt, i: v}), nil
		}
		return p.literal(t, value{k: kLong, i: v}), nil
	case tFloat:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil && !isRangeErr(err) {
			return exp{}, p.errf(t.pos, "expected a float literal, found %s", t.text)
		}
		if math.IsInf(f, 0) {
			return exp{}, p.errf(t.pos, "expected a float of at most %g, found %s", math.MaxFloat64, t.text)
		}
		return p.literal(t, value{k: kDouble, f: f}), nil
	case tTrue, tFalse, tNull:
		v := vNull
		if t.k != tNull {
			v = boolv(t.k == tTrue)
		}
		e := p.literal(t, v)
		e.isBool = true
		return e, nil
	case tID:
		return exp{n: &propNode{name: t.text}, pos: t.pos, isProp: true, name: t.text}, nil
	case tLParen:
		if err := p.needOperand(t); err != nil {
			return exp{}, err
		}
		e, err := p.parseOr()
		if err != nil {
			return exp{}, err
		}
		if c := p.peek(); c.k != tRParen {
			return exp{}, p.errf(c.pos, "expected ')' to close the '(' at position %d, found %s", t.pos, c.describe())
		}
		p.next()
		e.pos = t.pos
		return e, nil
	case tEOF:
		return exp{}, p.errf(t.pos, "expected an operand, found end of expression")
	}
	if t.k >= tNot && t.k <= tEndsWith && t.k != tAnd && t.k != tOr {
		return exp{}, p.errf(t.pos, "expected an operand (a property, a literal or '('), found keyword %s (keywords cannot name properties)", t.describe())
	}
	return exp{}, p.errf(t.pos, "expected an operand (a property, a literal or '('), found %s", t.describe())
}

func (p *parser) literal(t token, v value) exp {
	return exp{n: &constNode{v: v}, pos: t.pos, isConst: true, c: v}
}
