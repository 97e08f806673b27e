//go:build integration

package dynamoledger_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/pkg/billing/billingtest"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
)

// itemSize is DynamoDB's size of an item: the UTF-8 bytes of each
// attribute name plus its value (numbers and strings as their text, close
// enough for a comparison).
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)
		default:
			n++
		}
	}
	return n
}

// projectItems reads the account item and the spend shards of a project,
// without their markers (bounded by GCThreshold: checked apart), and
// returns the largest size and the most markers on one item.
func projectItems(t *testing.T, s *dynamoledger.Store, project string, shards int) (largest, markers int) {
	t.Helper()
	client := dynalite.Client(t, server.Endpoint(t))
	keys := []string{dynamoledger.PKAccount + project + "\x00" + dynamoledger.SKAccount}
	for i := range shards {
		keys = append(keys, dynamoledger.PKSpend+string(rune('0'+i/10))+string(rune('0'+i%10))+"#"+project+"\x00"+dynamoledger.SKSpend)
	}
	for _, k := range keys {
		pk, sk, _ := strings.Cut(k, "\x00")
		got, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{
			TableName:      aws.String(sharedTable(t)),
			Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		m := 0
		for name := range got.Item {
			if strings.HasPrefix(name, "m#") {
				delete(got.Item, name)
				m++
			}
		}
		largest, markers = max(largest, itemSize(got.Item)), max(markers, m)
	}
	return largest, markers
}

// Many keys through one project: no project item grows with them (the
// issue's 14,000-key failure), and each key's spend is on its own item.
func TestManyKeysItemSizeStays(t *testing.T) {
	const keys, workers, shards = 1000, 8, 4
	s := newStore(t, dynamoledger.Options{Shards: shards})
	project := billingtest.ID("p")
	if err := s.Seed(t.Context(), project, ptr(int64(1e15)), nil); err != nil {
		t.Fatal(err)
	}
	bill := func(from, to int) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range workers {
			wg.Go(func() {
				for i := range next {
					k := "key_" + project + "_" + string(rune('a'+i%26)) + strings.Repeat("x", i%7) + "_" + itoa(i)
					e := billingtest.NewEntry(project, k, 1000)
					if err := s.Bill(t.Context(), e); err != nil {
						t.Errorf("Bill: %v", err)
					}
				}
			})
		}
		for i := from; i < to; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	bill(0, 10)
	small, _ := projectItems(t, s, project, shards)
	bill(10, keys)
	large, markers := projectItems(t, s, project, shards)
	t.Logf("largest project item without markers: %d bytes after 10 keys, %d after %d keys; most markers on one: %d", small, large, keys, markers)
	// The spend grows from 5 to 7 digits on a shard: allow those bytes.
	if large > small+4 {
		t.Errorf("largest project item grew from %d to %d bytes with %d keys", small, large, keys)
	}
	if markers >= dynamoledger.DefaultGCThreshold+workers {
		t.Errorf("%d markers on one item", markers)
	}
	a := billingtest.MustAccount(t, s, project, "")
	if a.SpentNanos != keys*1000 {
		t.Errorf("spent %d, want %d", a.SpentNanos, keys*1000)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }
